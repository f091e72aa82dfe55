"""Issue 57's distillation corpus and teachers (benchmarks/harness/distil_corpus.py, teachers.py,
benchmarks/teacher_vectors.py): each family's texts are what the store embeds, once each; a
teacher's table keys a text as that teacher reads it; the second teacher's weights are refused
unless they are the upstream file. Nothing here fetches or runs a model."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from harness import distil_corpus
from harness.factusers import fact_users
from harness.heldout import DATA
from harness.teachers import MPNET, mpnet_folder

from recall.memory import make_turn

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.mark.parametrize("family", ["probes", "facts", "intent"])
def test_a_familys_texts_are_distinct_and_not_empty(family: str) -> None:
    texts = distil_corpus.FAMILIES[family]()
    for side in (texts.docs, texts.queries):
        assert side and len(set(side)) == len(side)
        assert all(t.strip() for t in side)


def test_a_stored_turn_is_the_text_the_store_embeds() -> None:
    user = fact_users(split="fresh")[0]
    turn = user.facts[0]
    want = make_turn("someone", turn.user, turn.assistant).text
    assert distil_corpus.stored(turn.user, turn.assistant) == want
    assert want in distil_corpus.facts().docs
    # every split's questions are listed: which a fit may read is the trainer's to decide
    asked = set(distil_corpus.facts().queries)
    assert {q.text for u in fact_users() for q in u.questions} <= asked


def test_the_probes_hold_the_control_users_turns_and_both_question_sets() -> None:
    texts = distil_corpus.probes()
    for name in ("restatement_probe.json", "restatement_probe_fresh.json"):
        for fact in json.loads((DATA / name).read_text())["facts"]:
            said = make_turn("c", fact["said"], distil_corpus.CONTROL_REPLY).text
            assert said in texts.docs
            assert set(fact["asked"]) <= set(texts.queries)


def test_a_teachers_key_reads_the_kind_only_where_the_teacher_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    sys.modules.pop("teacher_vectors", None)
    from teacher_vectors import teacher_key  # a script, on the path above

    text = "What car do I drive?"
    assert teacher_key("bge", "query", text) != teacher_key("bge", "doc", text)
    assert teacher_key("mpnet", "query", text) == teacher_key("mpnet", "doc", text)


def test_weights_that_are_not_upstream_are_refused(tmp_path: Path) -> None:
    folder = tmp_path / MPNET
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"not the model")
    with pytest.raises(RuntimeError, match="not the upstream"):
        mpnet_folder(tmp_path)
