"""Issue 45's fact probe: users who tell facts about themselves, then ask about each in other
words, at today's defaults, with the gate off, and with plain semantic search.

    python benchmarks/fact_probe.py [--split fresh] [--now 2026-06-15T12:00:00Z]

benchmarks/data/fact_users.json (benchmarks/harness/factusers.py): each user tells 30 facts
among 15 turns of small talk in one thread, then asks one question per fact that shares no
content word with the turn that told it, 10 questions about themselves on topics they never
mentioned, and 10 small-talk messages. `--split`: the `fresh` users (the default: written
after the `measure` users decided between gate rules, decision 0039), the `measure` users
(spent), the `fit` users, or all sixteen. One fresh database, each user their own
user id: the thread stored turn by turn (`store.add_turn`, the store's default model), a minute
apart, the last a minute before `--now`; then every message asked at `--now` with
`store.find(user, text, now=...)` in three regimes: the defaults (hybrid, second stage and gate,
the store's limit and threshold), the gate off (threshold 0, the same ranking and limit) and
plain semantic search (cosine, threshold 0.5, the store's limit).

Counted, per fact question: the turn that told the fact first (reach first), among what
returns (reach), the other memories returned with or instead of it; per never-said question
and small-talk message: nothing returned (silent). Bootstrap 95% intervals in two stages:
users drawn, then each drawn user's messages drawn (benchmarks/harness/bootstrap.py). The
gate's cost: defaults minus gate off, per fact question (paired). Writes docs/benchmarks.md
(section "fact-probe").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from statistics import median
from typing import Any

from harness.bootstrap import shown
from harness.db import fresh_database
from harness.factusers import NOW, SPLITS, FactUser, fact_users
from harness.report import git_revision, machine, publish, table
from harness.run import moment, parser, run
from harness.silence import sweep_mismatches

from recall.config import Settings
from recall.memory import Memory
from recall.store import MemoryStore

# each regime's arguments to `store.find` beyond the user, the text and the moment
REGIMES: dict[str, dict[str, Any]] = {
    "defaults": {},
    "gate off (threshold 0)": {"similarity_threshold": 0.0},
    "semantic 0.5": {"mode": "semantic", "similarity_threshold": 0.5},
}
DEFAULTS, GATE_OFF, _SEMANTIC = REGIMES


@dataclass
class Asked:
    """One message asked of a user, and what each regime returned."""

    user: str
    kind: str  # "fact", "never said" or "small talk"
    text: str
    fact: str | None = None  # the fact's memory id, for a fact question
    told: str = ""  # the turn that told the fact, for a fact question
    found: dict[str, list[Memory]] = field(default_factory=dict)

    def first(self, regime: str) -> bool:
        """The fact's turn comes first."""
        got = self.found[regime]
        return bool(got) and got[0].id == self.fact

    def reached(self, regime: str) -> bool:
        """The fact's turn is among what returns."""
        return any(m.id == self.fact for m in self.found[regime])

    def others(self, regime: str) -> int:
        """The memories returned that are not the fact's turn."""
        return len(self.found[regime]) - self.reached(regime)

    def silent(self, regime: str) -> bool:
        """Nothing returned."""
        return not self.found[regime]


async def probe(store: MemoryStore, user: FactUser, now: datetime) -> list[Asked]:
    """Store `user`'s thread, a turn a minute, the last a minute before `now`; then ask each of
    their messages at `now` in every regime."""
    uid = f"fact-{user.name.lower()}"
    facts: dict[int, str] = {}
    for i, turn in enumerate(user.thread):
        memory = await store.add_turn(
            uid, turn.user, turn.assistant, conversation_id=f"{uid}-told",
            created_at=now - timedelta(minutes=len(user.thread) - i),
        )  # fmt: skip
        if turn.fact is not None:
            facts[turn.fact] = memory.id
    asks = [Asked(user.name, "fact", q.text, facts[q.fact], user.fact_turn(q.fact).user)
            for q in user.questions]  # fmt: skip
    asks += [Asked(user.name, "never said", text) for text in user.never_said]
    asks += [Asked(user.name, "small talk", text) for text in user.small_talk]
    for ask in asks:
        for regime, options in REGIMES.items():
            result = await store.find(uid, ask.text, now=now, **options)
            ask.found[regime] = result.memories
    return asks


def rate(asks: Sequence[Asked], kind: str, measure: str, regime: str, scale: float = 100.0) -> str:
    """`measure` (an `Asked` method) over the messages of `kind`, with its interval."""
    sel = [a for a in asks if a.kind == kind]
    values = [float(getattr(a, measure)(regime)) for a in sel]
    return shown(values, [a.user for a in sel], scale, within=True)


def gate_cost(asks: Sequence[Asked], measure: str) -> str:
    """Defaults minus gate off of `measure`, paired per fact question, in points."""
    sel = [a for a in asks if a.kind == "fact"]
    diff = [float(getattr(a, measure)(DEFAULTS)) - float(getattr(a, measure)(GATE_OFF))
            for a in sel]  # fmt: skip
    return shown(diff, [a.user for a in sel], within=True)


def hidden(asks: Sequence[Asked]) -> list[Asked]:
    """Fact questions where the gate off returns the fact and the defaults do not."""
    return [a for a in asks if a.kind == "fact" and a.reached(GATE_OFF) and not a.reached(DEFAULTS)]


def fact_score(ask: Asked) -> float:
    """The score of the fact's turn in the gate-off search."""
    return next(m.score or 0.0 for m in ask.found[GATE_OFF] if m.id == ask.fact)


def line(ask: Asked) -> str:
    """A hidden fact: the question, the turn that told it, its score, what the defaults gave."""
    got = ask.found[DEFAULTS]
    given = f"{got[0].user_message!r} ({got[0].score or 0:.2f})" if got else "nothing"
    return (f"{ask.user}: {ask.text!r} (told: {ask.told!r}, score {fact_score(ask):.2f}) "
            f"-> {given}")  # fmt: skip


async def main() -> None:
    """Store each user's thread, ask their messages in the three regimes, print and write."""
    cli = parser(__doc__)
    cli.add_argument("--split", choices=[*SPLITS, "all"], default="fresh",
                     help="the fact users asked (default: fresh, the reported ones)")  # fmt: skip
    cli.add_argument("--now", type=moment, default=moment(NOW),
                     help=f"the moment asked (ISO 8601; default {NOW})")  # fmt: skip
    args = cli.parse_args()
    now: datetime = args.now
    revision = git_revision()
    users = fact_users(split=None if args.split == "all" else args.split)
    url = await fresh_database("recall_bench_fact_probe")
    settings = Settings(database_url=url, embedding_cache_ttl=0)
    started = datetime.now()
    async with MemoryStore.connect(settings) as store:
        asks = [a for user in users for a in await probe(store, user, now)]
    took = (datetime.now() - started).total_seconds()

    rows = [[regime, rate(asks, "fact", "first", regime), rate(asks, "fact", "reached", regime),
             rate(asks, "fact", "others", regime, 1.0),
             rate(asks, "never said", "silent", regime),
             rate(asks, "small talk", "silent", regime)] for regime in REGIMES]  # fmt: skip
    cost = [["defaults minus gate off (points)", gate_cost(asks, "first"),
             gate_cost(asks, "reached")]]  # fmt: skip
    facts = [a for a in asks if a.kind == "fact"]
    per_user = [
        [user.name, *(f"{sum(a.first(r) for a in mine)} / {sum(a.reached(r) for a in mine)}"
                      for r in REGIMES)]
        for user in users for mine in [[a for a in facts if a.user == user.name]]
    ]  # fmt: skip
    gone = hidden(asks)
    scores = [fact_score(a) for a in gone]
    spread = (
        f"{min(scores):.2f} to {max(scores):.2f}, median {median(scores):.2f}" if scores else "-"
    )
    talking = [a for a in asks if a.kind == "small talk" and not a.silent(DEFAULTS)]
    mismatched = sweep_mismatches(
        [a.found[DEFAULTS] for a in asks],
        [a.found[GATE_OFF] for a in asks],
        settings.similarity_threshold,
    )
    for ask in gone:
        print(f"hidden {line(ask)}")
    for ask in talking:
        print(f"small talk answered {ask.user}: {ask.text!r} -> "
              f"{[m.user_message for m in ask.found[DEFAULTS]]}")  # fmt: skip
    print(f"{len(asks)} messages asked, {took:.0f} s; defaults unlike the gate-off search cut at "
          f"{settings.similarity_threshold}: {mismatched}")  # fmt: skip
    examples = [line(a) for name in dict.fromkeys(a.user for a in gone)
                for a in [a for a in gone if a.user == name][:2]]  # fmt: skip
    body = f"""## Facts told, then asked in other words (issue 45's fact probe)

`python benchmarks/fact_probe.py --split {args.split} --now {now:%Y-%m-%dT%H:%M:%SZ}` on
{machine()}, commit {revision}, {datetime.now():%Y-%m-%d}. The `{args.split}` fact users of
benchmarks/data/fact_users.json ({", ".join(u.name for u in users)}): each tells 30 facts among
15 turns of small talk in one thread (`add_turn`, a minute apart, bge-small), then asks one
question per fact sharing no content word with the turn that told it, 10 questions on topics
never mentioned and 10 small-talk messages, `store.find(user, text, now=...)` in three regimes:
the store's defaults (hybrid with the second stage and its gate, limit {settings.max_memories},
threshold {settings.similarity_threshold}), the gate off (threshold 0, the same ranking and
limit) and plain semantic search (cosine, threshold 0.5, limit {settings.max_memories}). % (and
memories a question) with bootstrap 95% intervals in two stages: users drawn, then each drawn
user's messages ({len(facts)} fact questions, {len(users)} users).

{table(["regime", "reach first %", "reach %", "others a question", "never-said silent %",
        "small talk silent %"], rows)}

The gate's cost, paired per fact question (target, issue 45: at most 2 points of reach first):

{table(["", "reach first", "reach"], cost)}

Per user, fact questions with the fact first / returned (of 30):

{table(["user", *REGIMES], per_user)}

Facts the gate off returns and the defaults hide: {len(gone)} of {len(facts)} questions
({sum(a.silent(DEFAULTS) for a in gone)} with nothing returned, the others with other memories
scored over the threshold); the fact's score there {spread}. Small-talk messages answered at
the defaults: {len(talking)}. Searches at the defaults unlike the gate-off search cut at the
threshold: {mismatched}. Examples (user: question (the turn that told it, its score with the
gate off) -> what the defaults return first, its score):

{chr(10).join(f"- {e}" for e in examples) or "- none"}
"""  # fmt: skip
    publish("fact-probe", body, write=not args.no_write)


if __name__ == "__main__":
    run(main)
