"""A search's explanation in its user's words: which of the message's words a memory holds,
how close it is in meaning, how recent it is, what opened or shut the gate, and whether it
passes. The store writes these sentences (`Found.why`); `recall search --explain` and the
inspector show them as they are, with the raw parts of the score (`Memory.explanation`,
`raw_lines`) one flag or one click away (docs/retrieval.md, "Explanations").
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from recall.memory import Memory, embedding_text, own_words
from recall.search.echo import terms
from recall.search.verdict import Verdict

__all__ = ["NEAR", "raw_lines", "reasons"]

# how a cosine similarity is put in words: (at least, words), highest first
NEAR = ((0.8, "very close"), (0.7, "close"), (0.6, "somewhat close"), (-1.0, "far"))
# what each feature of the second stage is about, by the first of these parts of its name, as
# (in the ranker's words: about this memory, in the gate's: about the memories found); the
# parts of a score are summed by theme before they are put in words
_MEANING = ("how close it is in meaning", "how close the nearest memories are in meaning")
_WORDS = ("the message's words it holds", "the message's words the best memories hold")
_TIME = ("when it was said against the time the message names", "the time the message names")
_PLACE = (
    "its place among the nearest in meaning and in words",
    "whether the best memory leads in meaning and in words alike",
)
_THEMES = (
    ("intent", ("whether the message asks about something said before",) * 2),
    ("when", _TIME),
    ("time_hit", _TIME),
    ("temporal", _TIME),
    ("recency", ("how recent it is", "how recent the memories are")),
    ("nb_", ("the turns around it", "the turns around the best memories")),
    ("sess_", ("the turns around it", "the turns around the best memories")),
    ("rank", _PLACE),
    ("top_agree", _PLACE),
    ("bm", _WORDS),
    ("idf", _WORDS),
    ("term", _WORDS),
    ("coverage", (_WORDS[0], "how many of the message's words the memories hold at all")),
    ("unseen", (_WORDS[0], "how many of the message's words the memories hold at all")),
    ("cos", _MEANING),
    ("vectors", _MEANING),
    ("z", _MEANING),
    ("log_n", ("how many memories there are",) * 2),
    ("n_terms", ("how long the message is",) * 2),
    ("log_len", ("how long it is", "how long the memories are")),
    ("is_question", ("whether it is itself a question",) * 2),
)
_BASELINE = frozenset({"intercept", "offset", "bias"})  # a model's constant: no reason of its own


def _theme(feature: str, gate: bool) -> str | None:
    if feature in _BASELINE:
        return None
    for prefix, words in _THEMES:
        if feature.startswith(prefix) or f"_{prefix}" in feature:
            return words[gate]
    return "other signals"


def _strongest(parts: Mapping[str, float], sign: float, *, gate: bool) -> str:
    """The one or two themes that moved a logit most in the direction of `sign`, in words
    (`gate`: the gate's parts, about the memories found; else the ranker's, about one)."""
    sums: dict[str, float] = {}
    for feature, value in parts.items():
        theme = _theme(feature, gate)
        if theme is not None:
            sums[theme] = sums.get(theme, 0.0) + value
    best = sorted((t for t in sums if sums[t] * sign > 0), key=lambda t: -abs(sums[t]))[:2]
    return " and ".join(f"{t} ({sums[t]:+.2f})" for t in best) or "its baseline"


def _held_words(query: str, memory: Memory) -> str:
    asked = sorted(terms(query))
    if not asked:
        return "The message has no content words to look for."
    # what the turn is indexed by: the user's text and the reply's own words, not the
    # memories the reply quotes (decision 0038), as the keyword index has it
    held = terms(
        embedding_text(memory.user_message, memory.ai_response, own_words(memory.metadata))
    )
    found = [w for w in asked if w in held or f"{w}s" in held or w.removesuffix("s") in held]
    if not found:
        return "It holds none of the message's words."
    quoted = ", ".join(f'"{w}"' for w in found)
    return f"It holds {len(found)} of the message's {len(asked)} words: {quoted}."


def _nearness(similarity: float | None) -> str | None:
    if similarity is None:
        return None
    words = next(w for floor, w in NEAR if similarity >= floor)
    return f"In meaning it is {words} to the message (similarity {similarity:.2f})."


def _age(at: datetime, now: datetime) -> str:
    days = (now - at).total_seconds() / 86400
    if days < 0:
        return f"It is dated {at:%Y-%m-%d}, after the search."
    if days < 1 / 24:
        return f"It was said less than an hour ago ({at:%Y-%m-%d})."
    units = (("hour", 1 / 24, 1.0), ("day", 1.0, 60.0), ("month", 30.44, 730.0))
    unit, length = next(((u, n) for u, n, up_to in units if days < up_to), ("year", 365.25))
    n = int(days / length)
    return f"It was said {n} {unit}{'' if n == 1 else 's'} ago ({at:%Y-%m-%d})."


def _gate(raw: Mapping[str, Any], verdict: Verdict) -> str:
    gate, match, intent = float(raw["gate"]), float(raw["match"]), float(raw["intent"])
    if verdict.gate_open(gate):
        if gate != match and match < 0.0:  # a turn the intent opened (decision 0039)
            return (
                "The gate opened: the message reads as asking about something said before "
                f"(intent {intent:+.2f}), so the best memories are handed over though none "
                f"matches it closely (match {match:+.2f})."
            )
        why = _strongest(raw["gate_parts"], 1.0, gate=True)
        return f"The gate opened: some memory looks like it answers the message, mostly by {why}."
    # a turn whose intent pulled the gate shut (a search's never is: decision 0050)
    if gate != match and intent < match:
        return (
            "The gate stayed shut: the message does not read as asking about something said "
            f"before (intent {intent:+.2f}), so {verdict.nothing_passes}."
        )
    why = _strongest(raw["gate_parts"], -1.0, gate=True)
    return (
        "The gate stayed shut: no memory looks like it answers the message, mostly because of "
        f"{why}, so {verdict.nothing_passes}."
    )


def reasons(
    query: str,
    memory: Memory,
    *,
    passes: bool,
    verdict: Verdict,
    now: datetime,
) -> tuple[str, ...]:
    """Why `memory` scored what it did for `query` and whether it passes, in sentences for
    its user (the raw parts of the score stay in `memory.explanation`).

    Args:
        query: the message searched for.
        memory: a memory the search found (its `score`, `similarity` and, in the default mode
            with the second stage, `explanation`).
        passes: whether the store returns it.
        verdict: the search's rule (its mode and threshold), which also words the gate and
            the verdict.
        now: when the search ran (for "how recent").

    Returns:
        The sentences, in order: the words, the meaning, the age, the gate (the second stage
        only), what ranked it (likewise), the verdict.
    """
    out = [_held_words(query, memory)]
    near = _nearness(memory.similarity)
    if near is not None:
        out.append(near)
    out.append(_age(memory.created_at, now))
    raw = memory.explanation
    if raw is not None:
        out.append(_gate(raw, verdict))
        helped = _strongest(raw["ranker"], 1.0, gate=False)
        out.append(f"Its place among the candidates came mostly from {helped}.")
    elif verdict.mode == "hybrid":
        out.append("Its relevance fuses its meaning and keyword ranks (no second stage).")
    out.append(verdict.words(memory.score, passes))
    return tuple(out)


def raw_lines(raw: Mapping[str, Any], verdict: Verdict) -> list[str]:
    """The raw parts of a second-stage score (`Memory.explanation`), five per model, as
    `recall search --explain-raw` prints them for a search under `verdict`."""
    lines = [
        f"{verdict.gate_line(float(raw['gate']))}, match {raw['match']:+.2f}, "
        f"intent {raw['intent']:+.2f}; logit {raw['logit']:+.2f} (best {raw['best_logit']:+.2f})"
    ]
    for title, parts in (("gate", raw["gate_parts"]), ("ranker", raw["ranker"])):
        top = list(parts.items())[:5]
        lines.append(f"{title}: " + ", ".join(f"{k} {v:+.2f}" for k, v in top))
    return lines
