"""Issue 57's distillation corpus and teachers (benchmarks/harness/distil_corpus.py, teachers.py,
benchmarks/teacher_vectors.py): each family's texts are what the store embeds, once each; a
teacher's table keys a text as that teacher reads it; the second teacher's weights are refused
unless they are the upstream file. Nothing here fetches or runs a model."""

from __future__ import annotations

import itertools
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


def test_a_realmem_case_holds_only_the_sessions_before_its_own() -> None:
    from harness import realmem
    from harness.distil_cases import realmem_cases

    user = realmem.load(count=1)[0]
    cases = [c for c in realmem_cases() if c.group == user.name]
    assert cases
    for case in cases:
        asked = next(i for i, s in enumerate(user.sessions)
                     if any(q.text == case.question for q in s.queries))  # fmt: skip
        held = sum(len(s.pairs) for s in user.sessions[:asked])
        assert len(case.docs) == held and case.hits and max(case.hits) < held


def test_a_longmemeval_case_hits_only_turns_the_file_marks() -> None:
    from harness import longmemeval as lme
    from harness.distil_cases import longmemeval_cases

    records = {r.qid: r for r in lme.load()}
    cases = longmemeval_cases(every=20)
    assert cases and len(cases) <= len(records) // 20 + 1
    for case in cases:
        record = records[case.group]
        assert {record.turns[i]["user_message"] for i in case.hits} <= record.evidence
        assert len(case.docs) == len(record.turns)


def test_unlabelled_cases_ask_over_what_came_before_and_carry_no_hits() -> None:
    from harness.distil_cases import intent_cases, locomo_turn_cases

    cases = locomo_turn_cases()
    for before, case in itertools.pairwise(cases):
        assert not case.hits and len(case.docs) >= 5
        if case.group == before.group:  # the pair asked before is held when the next is asked
            assert case.docs[:-1] == before.docs and len(case.docs) == len(before.docs) + 1
    asked = intent_cases()
    assert len({c.question for c in asked}) == len(asked) and not any(c.hits for c in asked)
