"""Issue 57's student before training (benchmarks/harness/student.py): bge-small rebuilt in fp32
for torch from the shipped int8 ONNX encodes as the shipped embedder does, to the int8 rounding."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from harness.student import Student, export_int8, fp32_weights

from recall.embeddings import BgeSmallEmbeddings
from recall.errors import EmbeddingError

pytest.importorskip("torch")  # the minilm extra, which `make test` installs

TEXTS = [
    "What car do I drive?",
    "I drive a Toyota Prius. Thanks, I'll remember that.",
    "My sister lives in Lyon and teaches piano to children on weekends.",
]


def test_every_weight_is_rebuilt_and_the_vectors_are_the_shipped_ones() -> None:
    weights = fp32_weights()
    assert len(weights) == 197 and weights["encoder.layer.11.output.dense.weight"].shape == (
        384,
        1536,
    )
    student = Student(weights)
    shipped = BgeSmallEmbeddings()
    with student.torch.inference_mode():
        docs = student.encode(TEXTS).numpy()
        queries = student.encode(TEXTS, queries=True).numpy()
    want_docs = np.asarray(shipped.embed_documents(TEXTS))
    want_queries = np.asarray([shipped.embed_query(t) for t in TEXTS])
    # int8 against fp32: the same vectors to the quantisation's rounding (0.995 and up measured)
    assert (docs * want_docs).sum(1).min() > 0.99
    assert (queries * want_queries).sum(1).min() > 0.99


def test_a_student_exported_to_int8_runs_as_the_store_runs_bge_small(tmp_path: Path) -> None:
    student = Student()
    state = tmp_path / "student.pt"
    student.torch.save(student.model.state_dict(), state)
    folder = export_int8(state, tmp_path / "student")
    exported = BgeSmallEmbeddings(folder, verify=False)
    with student.torch.inference_mode():
        want = student.encode(TEXTS, queries=True).numpy()
    got = np.asarray([exported.embed_query(t) for t in TEXTS])
    # quantised again, per output column: 0.984 and up measured on the probe texts
    assert (got * want).sum(1).min() > 0.97
    with pytest.raises(EmbeddingError, match="sha256"):  # a student is not bge-small's release
        BgeSmallEmbeddings(folder).embed_query(TEXTS[0])
