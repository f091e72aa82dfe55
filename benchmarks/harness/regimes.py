"""The regimes in which benchmarks/locomo.py asks LoCoMo's questions (issue 20): who holds which
memories, and which questions go to whom. Built from the corpus alone (no database):

- full: each conversation is one user holding all of its turn pairs;
- small: per question, a user holding the question's evidence sessions and two other sessions
  of the same conversation (picked by an RNG seeded with the conversation and the evidence
  sessions; questions that come to the same sessions share a user): a user with a short
  history;
- repeated: each conversation's turn pairs plus, per question, its "echo": the question asked
  once before and answered "I'm not sure.", dated after the conversation's last session.

`embed` embeds every text once for all regimes; `turn_items` makes a regime's memories
`add_turns` items with those vectors; `targets` says, once the memories' ids are known, what
each question should find (and what it should not).
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from recall.embeddings import Vector
from recall.memory import make_turn
from recall.store import MemoryStore

from .corpus import Corpus

ECHO_REPLY = "I'm not sure."
LARGE = "large-0"  # the large user, as latency.py names its largest users
NOISE = 0.3  # per-vector noise on a large user's pair embedding: cosine to it about 0.96
OTHER_SESSIONS = 2  # sessions without evidence that a small user holds
SEED = 20  # issue 20
# each regime as locomo.py's tables (and the gate dump's splits) name it
LABELS = {"full": "full", "small": "small-user", "repeated": "repeated-question"}


@dataclass(frozen=True, slots=True)
class Item:
    """One memory of a regime, stored for `user`: the corpus's turn pair number `pair`, or the
    echo of question number `echo` (an index in `corpus.questions`)."""

    user: str
    pair: int | None = None
    echo: int | None = None


@dataclass(frozen=True, slots=True)
class Ask:
    """Question number `question` (an index in `corpus.questions`) asked of `user`."""

    question: int
    user: str


@dataclass(frozen=True)
class Regime:
    """Users' memories (in the order they are stored) and the questions asked of them."""

    name: str
    items: list[Item]
    asks: list[Ask]

    def users(self) -> list[str]:
        """The users holding memories, sorted."""
        return sorted({item.user for item in self.items})


@dataclass(frozen=True, slots=True)
class Target:
    """What an asked question should find among its user's memories, as memory ids: the
    memories holding its evidence, the ones from sessions without evidence (echoes included),
    its own echo (None outside the repeated regime) and every echo of the user."""

    evidence: frozenset[str]
    outside: frozenset[str]
    echo: str | None
    echoes: frozenset[str]


@dataclass(frozen=True)
class Vectors:
    """Each text embedded once, for every regime: the turn pairs' (as the store embeds a stored
    turn), the echoes' (one per question; None when no regime stores them) and the questions'
    (as the store embeds a query)."""

    pairs: list[Vector]
    echoes: list[Vector] | None
    queries: list[Vector]


def _pairs_by_session(corpus: Corpus) -> dict[str, dict[int, list[int]]]:
    """Each conversation's turn pair numbers by session, in order."""
    out: dict[str, dict[int, list[int]]] = {}
    for i, turn in enumerate(corpus.turns):
        out.setdefault(turn["user_id"], {}).setdefault(corpus.sessions[i], []).append(i)
    return out


def evidence_sessions(corpus: Corpus, question: int) -> set[int]:
    """The sessions holding a question's evidence."""
    return {corpus.sessions[i] for i in corpus.questions[question][3]}


def full(corpus: Corpus) -> Regime:
    """Each conversation is one user (named as the conversation) holding all of its pairs."""
    items = [Item(turn["user_id"], pair=i) for i, turn in enumerate(corpus.turns)]
    asks = [Ask(q, user) for q, (user, *_rest) in enumerate(corpus.questions)]
    return Regime("full", items, asks)


def small_users(corpus: Corpus, others: int = OTHER_SESSIONS, seed: int = SEED) -> Regime:
    """Per question, a user holding its evidence sessions and `others` other sessions of the
    same conversation (all there are when fewer), picked by an RNG seeded with `seed`, the
    conversation and the evidence sessions, so a conversation's picks do not depend on which
    other conversations are loaded. The user is named by the conversation and the sessions it
    holds ("conv-26-small-1-4-9"): questions that come to the same sessions share it."""
    sessions = _pairs_by_session(corpus)
    items: list[Item] = []
    asks: list[Ask] = []
    made: set[str] = set()
    for q, (conv, *_rest) in enumerate(corpus.questions):
        evidence = sorted(evidence_sessions(corpus, q))
        rest = sorted(set(sessions[conv]) - set(evidence))
        rng = random.Random(f"{seed}:{conv}:{evidence}")
        held = sorted({*evidence, *rng.sample(rest, min(others, len(rest)))})
        user = f"{conv}-small-" + "-".join(str(s) for s in held)
        if user not in made:
            made.add(user)
            items += [Item(user, pair=i) for s in held for i in sessions[conv][s]]
        asks.append(Ask(q, user))
    return Regime("small", items, asks)


def repeated(corpus: Corpus) -> Regime:
    """Each conversation as one user ("conv-26-repeated") holding all of its pairs, then one
    echo per question of the conversation; each question is asked of that user."""
    items: list[Item] = []
    asks: list[Ask] = []
    for conv, sessions in _pairs_by_session(corpus).items():
        user = f"{conv}-repeated"
        items += [Item(user, pair=i) for pairs in sessions.values() for i in pairs]
        mine = [q for q, (owner, *_rest) in enumerate(corpus.questions) if owner == conv]
        items += [Item(user, echo=q) for q in mine]
        asks += [Ask(q, user) for q in mine]
    return Regime("repeated", items, asks)


REGIMES = {"full": full, "small": small_users, "repeated": repeated}


def echo_dates(corpus: Corpus) -> dict[int, datetime | None]:
    """When each question was asked before: a day after its conversation's last session, a
    minute apart in the order of the questions (None when no session has a date)."""
    last: dict[str, datetime] = {}
    for turn in corpus.turns:
        when = turn["created_at"]
        if when is not None and (turn["user_id"] not in last or when > last[turn["user_id"]]):
            last[turn["user_id"]] = when
    seen: dict[str, int] = {}
    out: dict[int, datetime | None] = {}
    for q, (conv, *_rest) in enumerate(corpus.questions):
        n = seen[conv] = seen.get(conv, -1) + 1
        out[q] = last[conv] + timedelta(days=1, minutes=n) if conv in last else None
    return out


def echo_turn(corpus: Corpus, question: int) -> dict[str, Any]:
    """A question's echo as an `add_turns` item without a user: the question, "I'm not sure.",
    in the conversation "<conversation>-asked-before"."""
    conv, text, *_rest = corpus.questions[question]
    return {
        "user_message": text,
        "ai_response": ECHO_REPLY,
        "conversation_id": f"{conv}-asked-before",
        "metadata": {"asked_before": question},
    }


async def embed(store: MemoryStore, corpus: Corpus, *, echoes: bool) -> Vectors:
    """Embed the pairs and (when `echoes`) the echoes as the store embeds a stored turn, and
    the questions as it embeds a query."""
    cut = store.settings.max_message_length

    def text(user: str, item: dict[str, Any]) -> str:
        return make_turn(user, item["user_message"], item["ai_response"], max_length=cut).text

    pairs = await store.embedder.embed_documents([text(t["user_id"], t) for t in corpus.turns])
    echo_vectors = None
    if echoes:
        echo_vectors = await store.embedder.embed_documents(
            [text(q[0], echo_turn(corpus, n)) for n, q in enumerate(corpus.questions)]
        )
    queries = [await store.embedder.embed_query(q[1]) for q in corpus.questions]
    return Vectors(pairs, echo_vectors, queries)


def turn_items(corpus: Corpus, regime: Regime, vectors: Vectors) -> Iterator[dict[str, Any]]:
    """A regime's memories as `add_turns` items, in order, with their precomputed vectors."""
    dates = echo_dates(corpus)
    for item in regime.items:
        if item.pair is not None:
            turn, vector = corpus.turns[item.pair], vectors.pairs[item.pair]
        elif item.echo is not None and vectors.echoes is not None:
            turn = {**echo_turn(corpus, item.echo), "created_at": dates[item.echo]}
            vector = vectors.echoes[item.echo]
        else:
            raise ValueError(f"{item} is neither a pair nor an echo with a vector")
        yield {**turn, "user_id": item.user, "embedding": vector}


def targets(corpus: Corpus, regime: Regime, ids: Sequence[str]) -> list[Target]:
    """What each of the regime's questions should find, given its memories' ids (in the
    order of `regime.items`, as `add_turns` returns them)."""
    held: dict[str, list[tuple[Item, int | None, str]]] = {}  # (item, its session, its id)
    for item, memory in zip(regime.items, ids, strict=True):
        session = None if item.pair is None else corpus.sessions[item.pair]
        held.setdefault(item.user, []).append((item, session, memory))
    out = []
    for ask in regime.asks:
        wanted = corpus.questions[ask.question][3]
        sessions = evidence_sessions(corpus, ask.question)
        mine = held[ask.user]
        out.append(
            Target(
                evidence=frozenset(m for it, _s, m in mine if it.pair in wanted),
                outside=frozenset(m for _it, s, m in mine if s not in sessions),
                echo=next((m for it, _s, m in mine if it.echo == ask.question), None),
                echoes=frozenset(m for it, _s, m in mine if it.echo is not None),
            )
        )
    return out


def large_user(
    corpus: Corpus, vectors: Vectors, size: int, rng: np.random.Generator
) -> Iterator[dict[str, Any]]:
    """`size` memories of one user (`LARGE`): the corpus's pairs from a random start, cycled
    and numbered (no two equal), each vector its pair's plus noise, scaled to unit length."""
    start = int(rng.integers(len(corpus.turns)))
    for j in range(size):
        i = (start + j) % len(corpus.turns)
        turn = corpus.turns[i]
        base = np.asarray(vectors.pairs[i], dtype=np.float32)
        noisy = base + NOISE * rng.normal(size=base.shape).astype(np.float32) / np.sqrt(base.size)
        yield {"user_id": LARGE, "user_message": f"{turn['user_message']} ({j})",
               "ai_response": turn["ai_response"], "created_at": turn["created_at"],
               "embedding": noisy / np.linalg.norm(noisy)}  # fmt: skip
