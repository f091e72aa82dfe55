"""all-MiniLM-L6-v2 on ONNX Runtime: the same vectors as sentence-transformers, 2-3x sooner.

The ONNX graph is exported once, on this machine, from the installed (and sha256-checked)
weights; nothing is downloaded. The export is checked against the PyTorch model before it is
kept, and cached under a name that carries the weights' digest, the recipe and the exporter's
versions, so a new model or a new torch, transformers or ONNX Runtime gets a new file (and the
file it replaces is removed). Later processes load the cached file with ONNX Runtime alone: no
PyTorch or transformers import, which also makes start-up faster.

Why: profiling a retrieval showed the query embedding was 15-22 ms of it, and PyTorch's eager
BERT forward is most of that; ONNX Runtime computes the same function (max |difference| ~1e-7)
in 40% of the time here (docs/decisions/0007). The graph is exported with eager attention and
rewritten by ONNX Runtime's transformer optimizer into one fused Attention node per layer, which
takes a turn pair's embedding (about 80 tokens) to 0.81-0.87x the time (docs/decisions/0011).
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
import time
import warnings
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import structlog

from recall.errors import EmbeddingError

__all__ = ["OnnxEncoder", "export_onnx"]

log = structlog.stdlib.get_logger(__name__)

# The exported graph must reproduce PyTorch's vectors this closely (max absolute difference per
# component of the normalized embedding) on the probe texts, or it is thrown away.
EXPORT_TOLERANCE = 1e-4
_PROBES = [
    "I adopted a dog named Max",
    "What is my dog's name?",
    "short",
    "A longer memory about a trip to Lyon in May, the trains, the food, and the people there. " * 4,
]
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def _pool(hidden: npt.NDArray[np.float32], mask: npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
    """Mean over the real tokens, then L2-normalized (the model's pooling configuration)."""
    weights = mask[..., None].astype(np.float32)
    summed = (hidden * weights).sum(axis=1)
    counts = np.clip(weights.sum(axis=1), 1e-9, None)
    pooled = summed / counts
    norms = np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
    unit: npt.NDArray[np.float32] = (pooled / norms).astype(np.float32)
    return unit


def _tokenizer(model_dir: Path, max_length: int) -> Any:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tokenizer.enable_truncation(max_length=max_length)
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # noqa: S106  # a token, not a secret
    return tokenizer


def _encode_inputs(tokenizer: Any, texts: list[str]) -> dict[str, npt.NDArray[np.int64]]:
    encodings = tokenizer.encode_batch(texts)
    return {
        "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
        "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
        "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64),
    }


_PREFIX = "all-MiniLM-L6-v2-"
_TEMP_PREFIX = ".export-"
# A temporary file this old is a killed export's leftover, not a concurrent export's (which
# takes tens of seconds).
_STALE_TEMP_SECONDS = 3600.0


def _weights_prefix(weights_sha256: str) -> str:
    """How every cached graph of these weights is named at the start, whatever the recipe."""
    return f"{_PREFIX}{weights_sha256[:16]}-"


def _cache_name(weights_sha256: str, *, fused: bool = True) -> str:
    # The recipe is in the name, so a new recipe gets a new file. "fused": exported with eager
    # attention, then ONNX Runtime's transformer optimizer fuses attention and layer norms;
    # "sdpa": torch's export of the model as sentence-transformers loads it, unfused.
    # Versions from the installed distributions' metadata: importing torch to read its
    # version would cost every start the seconds the cached graph is there to save.
    recipe = "fused" if fused else "sdpa"
    return (
        f"{_weights_prefix(weights_sha256)}{recipe}-torch{metadata.version('torch')}"
        f"-transformers{metadata.version('transformers')}-ort{metadata.version('onnxruntime')}.onnx"
    ).replace("+", "_")


def _remove_stale(cache_dir: Path, target: Path, weights_sha256: str) -> list[str]:
    """Delete what earlier exports left in `cache_dir`: graphs of the same weights under other
    names (an older recipe or older versions: never read again) and temporary files of killed
    exports. Graphs of other weights are left alone. Returns the names removed."""
    removed = []
    now = time.time()
    for path in cache_dir.iterdir():
        stale_graph = (
            path.name.startswith(_weights_prefix(weights_sha256))
            and path.suffix == ".onnx"
            and path != target
        )
        try:
            stale_temp = (
                path.name.startswith(_TEMP_PREFIX)
                and now - path.stat().st_mtime > _STALE_TEMP_SECONDS
            )
            if stale_graph or stale_temp:
                path.unlink()
                removed.append(path.name)
        except OSError:  # gone already, or not ours to delete: it only costs disk space
            continue
    return removed


class _QuietOptimizer(logging.Filter):
    """Drops the transformer optimizer's INFO records (one per fusion). Its modules log under
    their bare module names (`fusion_attention`, `onnx_model`, ...), so they are recognised by
    the file they come from."""

    def __init__(self, directory: str) -> None:
        super().__init__()
        self._directory = directory

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING or not record.pathname.startswith(self._directory)


def _fuse(path: Path, config: Any) -> int:
    """Rewrite the graph at `path` with ONNX Runtime's BERT fusions (one Attention node per layer,
    SkipLayerNormalization, EmbedLayerNormalization); return the number of Attention nodes.

    The session's own graph optimizations do not recognise the attention in torch's export;
    this offline pass does when the model was exported with eager attention.
    """
    from onnxruntime import transformers as ort_transformers
    from onnxruntime.transformers.optimizer import optimize_model

    quiet = _QuietOptimizer(str(Path(ort_transformers.__file__).parent))
    handlers = list(logging.getLogger().handlers)  # each export adds and removes its own filter
    for handler in handlers:
        handler.addFilter(quiet)
    try:
        model = optimize_model(
            str(path),
            model_type="bert",
            num_heads=int(config.num_attention_heads),
            hidden_size=int(config.hidden_size),
            opt_level=0,  # fusions only; the session applies its own optimizations at load
        )
        model.save_model_to_file(str(path))
        return int(model.get_fused_operator_statistics().get("Attention", 0))
    finally:
        for handler in handlers:
            handler.removeFilter(quiet)


def _export_graph(bert: Any, sample: dict[str, np.ndarray], path: Path, *, fused: bool) -> int:
    """Export `bert`'s hidden states to `path` (torch's ONNX export), fused when `fused`;
    the number of layers whose attention was fused (0 unfused)."""
    import torch

    class Hidden(torch.nn.Module):
        def __init__(self, model: Any) -> None:
            super().__init__()
            self.model = model

        def forward(self, ids: Any, mask: Any, types: Any) -> Any:
            return self.model(input_ids=ids, attention_mask=mask, token_type_ids=types)[0]

    dynamic = {name: {0: "batch", 1: "tokens"} for name in (*_INPUTS, "hidden")}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's notes on Python control flow
        torch.onnx.export(
            Hidden(bert),
            tuple(torch.from_numpy(sample[name]) for name in _INPUTS),
            str(path),
            input_names=list(_INPUTS),
            output_names=["hidden"],
            dynamic_axes=dynamic,
            opset_version=17,
            dynamo=False,
        )
        attention, layers = 0, int(bert.config.num_hidden_layers)
        if fused:
            # An optimizer that cannot fuse leaves a correct, slower graph; it is checked
            # and cached like any other (the same versions would not fuse it next time).
            try:
                attention = _fuse(path, bert.config)
            except Exception as exc:
                log.warning("embedding.onnx.unfused", error=str(exc), layers=layers)
            else:
                if attention != layers:
                    log.warning(
                        "embedding.onnx.unfused",
                        error=f"{attention} of {layers} layers' attention fused",
                        layers=layers,
                    )
    return attention


def _export_error(reference: Any, path: Path, model_dir: Path, max_length: int) -> float:
    """The largest difference between the graph at `path` and the PyTorch model `reference`
    on the probes.

    Raises:
        EmbeddingError: it is over `EXPORT_TOLERANCE`.
    """
    expected = reference.encode(
        _PROBES, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
    )
    got = OnnxEncoder(path, model_dir, max_length=max_length).encode(_PROBES)
    error = float(np.abs(np.asarray(expected) - got).max())
    if error > EXPORT_TOLERANCE:
        raise EmbeddingError(
            f"the ONNX export of all-MiniLM-L6-v2 differs from PyTorch by {error:.2e} "
            f"(> {EXPORT_TOLERANCE}); set RECALL_EMBEDDING_BACKEND=torch"
        )
    return error


def export_onnx(
    model_dir: Path, weights_sha256: str, cache_dir: Path, max_length: int, *, fused: bool = True
) -> Path:
    """The cached ONNX graph for the model in `model_dir`, exported and checked if missing.

    Concurrent exporters each write a temporary file and rename it into place, so a reader only
    ever sees a complete, checked file.

    Args:
        fused: export with eager attention and fuse (the default backend's graph); False keeps
            torch's plain export of the SDPA model (the graph before decision 0011, for A/B).

    Raises:
        EmbeddingError: the export failed or does not reproduce the PyTorch model.
    """
    cache_dir.mkdir(parents=True, exist_ok=True)
    target = cache_dir / _cache_name(weights_sha256, fused=fused)
    if target.exists():
        return target
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # no "Loading weights" bar
    reference = SentenceTransformer(str(model_dir), device="cpu")
    # The same weights with the textbook attention (not SDPA): the form the fusion recognises.
    bert: Any = (
        AutoModel.from_pretrained(str(model_dir), attn_implementation="eager")
        if fused
        else reference[0].auto_model
    )
    bert.eval()
    sample = _encode_inputs(_tokenizer(model_dir, max_length), _PROBES)
    fd, tmp_name = tempfile.mkstemp(dir=cache_dir, prefix=_TEMP_PREFIX, suffix=".onnx")
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        attention = _export_graph(bert, sample, tmp, fused=fused)
        error = _export_error(reference, tmp, model_dir, max_length)
        tmp.replace(target)
    except EmbeddingError:
        raise
    except Exception as exc:
        raise EmbeddingError(f"could not export all-MiniLM-L6-v2 to ONNX: {exc}") from exc
    finally:
        tmp.unlink(missing_ok=True)
    log.info(
        "embedding.onnx.exported", path=str(target), max_error=error, fused_attention=attention
    )
    if removed := _remove_stale(cache_dir, target, weights_sha256):
        log.info("embedding.onnx.removed_stale", files=removed)
    return target


class OnnxEncoder:
    """Tokenizer + ONNX Runtime session + mean pooling: texts in, unit vectors out.

    Thread-safe (ONNX Runtime sessions are); one session per process is enough.

    Args:
        model_path: the exported `.onnx` file.
        model_dir: the directory holding `tokenizer.json`.
        max_length: tokens per text at most (the model was trained with 256).
        threads: intra-op threads; all cores by default.
    """

    def __init__(
        self, model_path: Path, model_dir: Path, *, max_length: int, threads: int = 0
    ) -> None:
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = threads
        options.log_severity_level = 3  # warnings about unused initializers are noise here
        self._session = onnxruntime.InferenceSession(
            str(model_path), options, providers=["CPUExecutionProvider"]
        )
        self._tokenizer = _tokenizer(model_dir, max_length)
        self._lock = threading.Lock()  # the tokenizer's padding state is not shared safely

    def encode(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """Unit-length embeddings of `texts`, one row each (one forward pass)."""
        with self._lock:
            inputs = _encode_inputs(self._tokenizer, texts)
        (hidden,) = self._session.run(["hidden"], inputs)
        return _pool(np.asarray(hidden, dtype=np.float32), inputs["attention_mask"])
