"""The one verdict (issue 48): whether the threshold applies, whether a score passes, and the
words with the real threshold."""

from __future__ import annotations

import math

import pytest

from recall.search.verdict import Verdict


@pytest.mark.parametrize("mode", ["semantic", "hybrid"])
def test_a_score_passes_when_it_reaches_the_threshold(mode: str) -> None:
    verdict = Verdict(mode, 0.5)  # type: ignore[arg-type]
    assert verdict.applies
    assert verdict.passes(0.5) and verdict.passes(0.9)
    assert not verdict.passes(0.4999) and not verdict.passes(None)
    assert verdict.max_distance == 0.5
    assert verdict.within(0.5) and not verdict.within(0.51) and not verdict.within(None)


def test_keyword_mode_has_no_threshold() -> None:
    verdict = Verdict("keyword", 0.5)
    assert not verdict.applies
    assert verdict.passes(0.01) and verdict.passes(None)
    assert verdict.words(0.2, True).endswith("does not apply in keyword mode, so it is returned.")


def test_the_gate_opens_where_its_score_reaches_the_threshold() -> None:
    for threshold in (0.1, 0.3, 0.5, 0.9):
        verdict = Verdict("hybrid", threshold)
        opens = verdict.gate_opens_at
        assert 1 / (1 + math.exp(-opens)) == pytest.approx(threshold)
        assert verdict.gate_open(opens + 1e-9) and not verdict.gate_open(opens - 1e-6)
    assert Verdict("hybrid", 0.0).gate_opens_at == -math.inf
    assert Verdict("hybrid", 1.0).gate_opens_at == math.inf
    assert Verdict("hybrid", 0.5).at(0.0) == Verdict("hybrid", 0.0)


def test_the_words_carry_the_threshold_used() -> None:
    at_03 = Verdict("hybrid", 0.3)
    assert at_03.words(0.38, True) == "Relevance 0.380 reaches the threshold 0.3: it is returned."
    assert "reaches the threshold 0.3, but it is kept out" in at_03.words(0.38, False)
    assert at_03.words(0.2, False) == "Relevance 0.200 is under the threshold 0.3: it is kept out."
    assert (
        Verdict("semantic", 0.7).words(0.9, True).startswith("Similarity 0.900 reaches 0.7")
        is False
    )
    assert "threshold 0.7" in Verdict("semantic", 0.7).words(0.9, True)
    assert at_03.nothing_passes == "nothing passes the threshold 0.3"
    assert at_03.gate_line(-1.0) == "gate -1.00 (below -0.85: nothing passes 0.3)"
