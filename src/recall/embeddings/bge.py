"""bge-small-en-v1.5 (int8 ONNX), offline: the default embedding model.

Its two files (`model_quantized.onnx`, `tokenizer.json`: Xenova's int8 export of BAAI's MIT
weights, 34 MB) ship inside this package as data (`models/bge-small-en-v1.5-int8/`, with their
NOTICE), so a plain `pip install langgraph-recall` has them: no model hub, no other wheel, no
torch (docs/libraries.md, docs/decisions/0022). Both files are checked against the hashes of
the public export before they are loaded. The model runs on ONNX Runtime with the `tokenizers`
tokenizer: CLS pooling, L2-normalised, 384 dims, and the BGE retrieval instruction before each
query.
"""

from __future__ import annotations

import threading
from contextlib import ExitStack
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import numpy as np
import structlog
from langchain_core.embeddings import Embeddings

from recall.embeddings.embedder import file_sha256
from recall.errors import EmbeddingError

__all__ = [
    "BGE_MODEL_NAME",
    "BGE_ONNX_SHA256",
    "BGE_TOKENIZER_SHA256",
    "BgeSmallEmbeddings",
    "packaged_model_files",
]

log = structlog.stdlib.get_logger(__name__)

BGE_MODEL_NAME = "bge-small-en-v1.5"
BGE_ONNX_SHA256 = "6c9c6101a956d62dfb5e7190c538226c0c5bb9cb27b651234b6df063ee7dbfe4"
BGE_TOKENIZER_SHA256 = "d241a60d5e8f04cc1b2b3e9ef7a4921b27bf526d9f6050ab90f9267a1f9e5c66"
QUERY_INSTRUCTION = "Represent this sentence for searching relevant passages: "
_FOLDER = ("models", "bge-small-en-v1.5-int8")
_ONNX, _TOKENIZER = "model_quantized.onnx", "tokenizer.json"
_MAX_TOKENS = 512
_REINSTALL = "reinstall langgraph-recall (its wheel carries the model files)"


def packaged_model_files() -> tuple[Traversable, Traversable]:
    """The packaged model's two files (ONNX graph, tokenizer), as `importlib.resources` finds
    them inside the installed `recall` package; nothing is read."""
    folder = resources.files("recall.embeddings").joinpath(*_FOLDER)
    return folder.joinpath(_ONNX), folder.joinpath(_TOKENIZER)


class BgeSmallEmbeddings(Embeddings):
    """bge-small-en-v1.5 int8: offline, CPU, normalized, 384 dims; about 4 ms per query here.

    The model loads on first use, from the files packaged with recall, after both files' sha256
    are checked. Thread-safe: the store calls it from worker threads.

    Args:
        model_dir: a folder holding `model_quantized.onnx` and `tokenizer.json`; the files
            packaged with recall by default.
        verify: check the two files' sha256 before loading them.
        threads: ONNX Runtime's threads per call (the vectors are the same for any number).
            One by default (issue 56): on 2 cores beside the database, against two, one thread
            made a semantic-only search 12-18% faster at p50 and the default path 0-6% (three
            runs taking turns), and embedding a turn 19% faster (docs/benchmarks.md
            "onnx-threads"); a process serving several users embeds their queries in parallel
            on its worker threads, each one thread.
        spin: let ONNX Runtime's threads spin between calls. Off by default: on 2 cores the
            spinning threads take the cores the database needs, and with them asleep the
            default search path was 8% faster at p50 and 18% at p95; a semantic-only search
            was 27% slower at p50 (the threads wake for each query) and 29% faster at p95
            (docs/benchmarks.md "onnx-spin").
    """

    model_name = BGE_MODEL_NAME
    dimensions = 384

    def __init__(
        self,
        model_dir: Path | None = None,
        *,
        verify: bool = True,
        threads: int = 1,
        spin: bool = False,
    ) -> None:
        self._model_dir = model_dir
        self._verify = verify
        self._threads = threads
        self._spin = spin
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
            if self._model_dir is not None:
                files: tuple[Traversable, Traversable] = (
                    self._model_dir / _ONNX,
                    self._model_dir / _TOKENIZER,
                )
            else:
                files = packaged_model_files()
            # as_file: a real path for ONNX Runtime even from a zipped install (a temporary copy,
            # gone once both are loaded into memory)
            with ExitStack() as stack:
                onnx_path, tokenizer_path = (
                    stack.enter_context(resources.as_file(f)) for f in files
                )
                self._check(onnx_path, BGE_ONNX_SHA256)
                self._check(tokenizer_path, BGE_TOKENIZER_SHA256)
                try:
                    import onnxruntime as ort
                    from tokenizers import Tokenizer

                    tokenizer = Tokenizer.from_file(str(tokenizer_path))
                    tokenizer.enable_truncation(_MAX_TOKENS)  # one text at a time: no padding
                    options = ort.SessionOptions()
                    options.intra_op_num_threads = self._threads
                    options.inter_op_num_threads = 1
                    if not self._spin:  # idle threads sleep instead of taking a core
                        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
                    session = ort.InferenceSession(
                        str(onnx_path), options, providers=["CPUExecutionProvider"]
                    )
                except Exception as exc:
                    raise EmbeddingError(f"could not load {BGE_MODEL_NAME}: {exc}") from exc
            self._inputs = {i.name for i in session.get_inputs()}
            self._tokenizer, self._session = tokenizer, session
            log.info(
                "embedding.model.loaded",
                model=BGE_MODEL_NAME,
                path=str(onnx_path.parent),
                backend="onnx",
            )

    def _check(self, path: Path, expected: str) -> None:
        if not path.is_file():
            raise EmbeddingError(f"{path} is missing: {_REINSTALL}")
        if self._verify and file_sha256(path) != expected:
            raise EmbeddingError(
                f"{path} is not the {BGE_MODEL_NAME} release (sha256 mismatch); {_REINSTALL}"
            )

    def _encode(self, texts: list[str]) -> list[list[float]]:
        self._load()
        return [self._encode_one(text) for text in texts]

    def _encode_one(self, text: str) -> list[float]:
        # One text per forward pass, never a batch: the int8 graph quantizes each layer's
        # input with one scale for the whole batch (DynamicQuantizeLinear), so in a batch a
        # text's vector moved with the texts beside it (up to 0.016 per component, cosine
        # 0.996 to itself alone), and a memory's vector depended on how it was written
        # (`add_turn` or `add_turns`, which rows `recall reembed` read with it). The price is
        # small, on bulk writes only: 128 chat turns took 1.08 s one by one against 0.99 s in
        # padded batches of 32 (medians, an idle 16-core Xeon, the default 2 threads).
        encoded = self._tokenizer.encode(text)
        ids = np.array([encoded.ids], dtype=np.int64)
        feed = {
            "input_ids": ids,
            "attention_mask": np.array([encoded.attention_mask], dtype=np.int64),
        }
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        cls = self._session.run(None, feed)[0][:, 0, :]
        # the norm along an axis is numpy's own sum, not BLAS's dot, whose last bit depends on
        # the CPU's kernel
        cls = cls / np.linalg.norm(cls, axis=1, keepdims=True)
        return [float(x) for x in cls[0]]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed stored texts, each on its own: a text's vector does not depend on the
        others."""
        return self._encode(list(texts))

    def embed_query(self, text: str) -> list[float]:
        """Embed one search query, with the BGE retrieval instruction before it."""
        return self._encode([QUERY_INSTRUCTION + text])[0]
