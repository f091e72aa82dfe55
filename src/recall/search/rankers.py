"""One ranker interface, its model as data: what the store calls to score a query's candidates.

A ranker (`Ranker`) is code that reads a fitted model: `recall.search.second_stage.SecondStage`
(the default ranking, decision 0024) and `recall.search.fusion.FusionModel` (the hybrid mode's
ranking for an embedder without a second stage, decision 0005). Each model ships as package
data, one JSON file per model under `recall/search/models/<kind>/<name>.json`, and is read by
`model_text` (once per process: `second_stage_for`, `default_fusion`). The store holds one
ranker. A ranker brings the candidates it reads (`Ranker.gather`, from the store's
`CandidateSource`: its own type per ranker, since the second stage reads far more of a
candidate than the fusion does), and the store renders what `Ranker.rank` gives back
(`Ranking`): an order, a score per candidate and, when asked, the parts of a score.

Decision 0034 (docs/decisions/0034-one-ranker-interface.md) says what a caller may decide.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from importlib import resources
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, runtime_checkable

import numpy as np

from recall.errors import ConfigError

if TYPE_CHECKING:
    from recall.embeddings import Vector
    from recall.rows import CandidateRow, MemoryRow
    from recall.search.assembly import KeywordSide

__all__ = [
    "MODELS",
    "Ask",
    "CandidateSource",
    "Gathered",
    "Query",
    "Ranker",
    "Ranking",
    "load_model",
    "model_text",
    "shipped_model",
]

MODELS = "models"
"""The package data folder of `recall.search` that holds the rankers' models, by kind."""

C = TypeVar("C")
M = TypeVar("M")


@dataclass(frozen=True, slots=True)
class Query:
    """What a ranker knows of the message.

    Attributes:
        text: the message (cut to the store's `max_query_length`).
        vector: its embedding, float64.
        now: when it is asked (None: now); a time it names is read from here.
        intent: whether the gate also reads the message's intent (does it ask anything of
            memory at all): True for a turn of conversation (the retrieval node), False for a
            search someone typed or asked for (`recall search`, the inspector, the
            memory-search tool), where asking is given and only a match opens the gate.
    """

    text: str
    vector: np.ndarray
    now: datetime | None = None
    intent: bool = True


@runtime_checkable
class Ranking(Protocol):
    """A ranker's verdict on one query's candidates."""

    @property
    def order(self) -> Sequence[int]:
        """Indexes into the candidates, best first."""
        ...

    @property
    def scores(self) -> Sequence[float]:
        """Each candidate's score (0-1), in the candidates' order: what the threshold reads."""
        ...

    def explanation(self, index: int) -> dict[str, Any] | None:
        """The parts of candidate `index`'s score as plain data, or None when the ranker has
        none to give."""
        ...


class CandidateSource(Protocol):
    """Where a ranker gets its candidates: the store's (`recall.store.candidates.Candidates`).
    Every method reads one user's memories and leaves out the questions left unanswered
    (`recall.search.echo`)."""

    async def for_query(
        self,
        user_id: str,
        query_text: str,
        query_vector: Vector,
        k: int,
        *,
        words: KeywordSide | None = None,
    ) -> tuple[list[CandidateRow], list[int]]:
        """The best `k` by cosine and by BM25, with their details (the second stage's)."""
        ...

    async def nearest(self, user_id: str, vector: Vector, k: int) -> list[MemoryRow]:
        """The nearest `k` by cosine."""
        ...

    async def best_by_words(
        self, user_id: str, text: str, vector: Vector, k: int
    ) -> list[MemoryRow]:
        """The best `k` by BM25 for the words of `text`, each with its cosine to `vector`."""
        ...


@dataclass(frozen=True, slots=True)
class Ask:
    """What a ranker is asked to gather candidates for.

    Attributes:
        user_id: whose memories.
        query: the message (its vector as float64, the moment and whether the intent counts).
        vector: the message's vector as the embedder gave it (what the database is sent).
        limit: how many memories the search returns at most.
        breadth: how many memories each side brings at least (`Settings.hybrid_candidates`;
            a ranker with its own breadth, like the second stage's, reads its own).
        words: the keyword side, when the store built it while the query was being embedded
            (only for a ranker with `early_terms`).
    """

    user_id: str
    query: Query
    vector: Vector
    limit: int
    breadth: int
    words: KeywordSide | None = None


@dataclass(frozen=True, slots=True)
class Gathered(Generic[C]):
    """A ranker's candidates for one query.

    Attributes:
        rows: each candidate's row, by index: what the store renders as a `Memory`.
        nearness: each candidate's cosine similarity to the query, by index.
        candidates: what `Ranker.rank` reads, in the same order as `rows`.
    """

    rows: Sequence[CandidateRow | MemoryRow]
    nearness: Sequence[float]
    candidates: C


@runtime_checkable
class Ranker(Protocol[C]):
    """Scores a query's candidates with a fitted model that ships as data (`model_text`); it
    brings the candidates it reads (`gather`)."""

    @property
    def early_terms(self) -> bool:
        """Whether its candidates start from the keyword side's terms
        (`recall.search_terms`), which need no vector: the store may then build that side while
        the query is being embedded and hand it over in `Ask.words`."""
        ...

    async def gather(self, source: CandidateSource, ask: Ask) -> Gathered[C] | None:
        """The candidates it reads for `ask`, from `source`; None: there are none."""
        ...

    def rank(self, query: Query, candidates: C) -> Ranking:
        """Score `candidates` for `query`."""
        ...


def model_text(kind: str, name: str) -> str | None:
    """The shipped model file `models/<kind>/<name>.json` as text, or None when there is none.

    Args:
        kind: "second_stage" or "fusion".
        name: the model's name (for the second stage, the embedding model it was fitted for).
    """
    entry = resources.files("recall.search").joinpath(MODELS, kind, f"{name}.json")
    if not entry.is_file():
        return None
    return entry.read_text("utf-8")


def load_model(text: str, from_json: Callable[[Mapping[str, Any]], M]) -> M:
    """A model from its file's text: JSON read by the ranker's `from_json` (e.g.
    `SecondStage.from_json`, `FusionModel.from_json`).

    Raises:
        ConfigError: the text is not a JSON object, or not the ranker's model.
    """
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"model file is not JSON: {exc}") from exc
    if not isinstance(data, Mapping):
        raise ConfigError("model file is not a JSON object")
    return from_json(data)


def shipped_model(kind: str, name: str, from_json: Callable[[Mapping[str, Any]], M]) -> M | None:
    """The shipped model `models/<kind>/<name>.json` (`model_text`, `load_model`), or None when
    there is none.

    Raises:
        ConfigError: the file is not the ranker's model.
    """
    text = model_text(kind, name)
    return None if text is None else load_model(text, from_json)
