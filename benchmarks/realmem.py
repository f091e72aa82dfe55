"""RealMem's users at the defaults, with the gate off and with plain cosine top-3 (issue 45).

    python benchmarks/realmem.py [--users N]

The eight RealMem users of ../shared/data/realmem/ (benchmarks/harness/realmem.py): one person
and an assistant, 177-276 sessions each over months. One fresh database, each user their own
user id; per user, session by session in the file's order: first every query turn of the
session is asked at the session's time (`store.find(user, text, now=...)`) with only the
earlier sessions stored, then the session's turn pairs are stored (`add_turns`, one memory a
pair, conversation id the session's uuid, a minute a pair from the session's time). Asked the
same way, at their session: up to 20 user turns per user that are not queries ("no memory
needed"), drawn seeded from the sessions after the first. Three regimes: the store's defaults
(hybrid, second stage and gate, limit 3, threshold 0.5), the gate off (threshold 0, the same
ranking and limit) and plain cosine top-3 (semantic, threshold 0, limit 3).

Counted, per query: a returned memory from a session its answer's `memory_used` names (reach,
session level), nothing returned; per "no memory needed" turn: nothing returned (silent). By
the user's size when asked (memories stored: under 50, 50-500, over 500) for the defaults and
the gate off, with the gate's cost paired per query (issue 45's target: at most 2 points in
every stratum). Bootstrap 95% intervals in two stages: users drawn, then each drawn user's
queries (benchmarks/harness/bootstrap.py). Every text is embedded once (the store's model) and
kept in .recall/realmem-vectors.npz; the searches are given the vectors. Writes
docs/benchmarks.md (section "realmem").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
from harness.bootstrap import shown
from harness.db import fresh_database
from harness.realmem import Message, User, items, load, no_memory_needed, query_vector, vectors
from harness.report import git_revision, machine, publish, table
from harness.run import parser, run

from recall.config import Settings
from recall.memory import Memory
from recall.store import MemoryStore

# each regime's arguments to `store.find` beyond the user, the text, the moment and the vector
REGIMES: dict[str, dict[str, Any]] = {
    "defaults": {},
    "gate off (threshold 0)": {"similarity_threshold": 0.0},
    "cosine top-3": {"mode": "semantic", "similarity_threshold": 0.0, "limit": 3},
}
DEFAULTS, GATE_OFF, COSINE = REGIMES
STRATA = (("under 50", 0, 50), ("50-500", 50, 501), ("over 500", 501, 10**9))
NO_MEMORY = "no memory needed"


@dataclass
class Asked:
    """One message asked of a user, the memories they held then, and what each regime
    returned."""

    user: str
    message: Message
    size: int  # the user's memories when asked
    found: dict[str, list[Memory]] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        """A query turn ("query") or not ("no memory needed")."""
        return "query" if self.message.query_id is not None else NO_MEMORY

    def reached(self, regime: str) -> bool:
        """A returned memory is from a session the query's answer used."""
        return any(m.conversation_id in self.message.used for m in self.found[regime])

    def silent(self, regime: str) -> bool:
        """Nothing returned."""
        return not self.found[regime]

    def returned(self, regime: str) -> int:
        """The memories returned."""
        return len(self.found[regime])


async def ask(store: MemoryStore, user: User, message: Message, at: datetime, size: int,
              vecs: dict[str, np.ndarray]) -> Asked:  # fmt: skip
    """`message` asked of `user` at `at` in every regime, with its cached vector."""
    asked = Asked(user.name, message, size)
    vector = query_vector(message.text, vecs)
    for regime, options in REGIMES.items():
        result = await store.find(user.user_id, message.text, now=at, query_vector=vector,
                                  **options)  # fmt: skip
        asked.found[regime] = list(result.memories)
    return asked


async def replay(store: MemoryStore, user: User, vecs: dict[str, np.ndarray]) -> list[Asked]:
    """`user`'s sessions in order: each session's queries (and sampled other turns) asked with
    the earlier sessions stored, then its pairs stored."""
    others: dict[int, list[Message]] = {}
    for i, message in no_memory_needed(user):
        others.setdefault(i, []).append(message)
    stored: set[str] = set()
    out = []
    for i, session in enumerate(user.sessions):
        for message in [*session.queries, *others.get(i, [])]:
            out.append(await ask(store, user, message, session.at, len(stored), vecs))
        stored.update(await store.add_turns(items(user, session, vecs), writers=1))
    print(f"{user.name}: {len(stored)} memories, "
          f"{sum(a.kind == 'query' for a in out)} queries asked", flush=True)  # fmt: skip
    return out


def rate(asks: Sequence[Asked], measure: str, regime: str, scale: float = 100.0) -> str:
    """`measure` (an `Asked` method) over `asks`, with its two-stage interval."""
    values = [float(getattr(a, measure)(regime)) for a in asks]
    return shown(values, [a.user for a in asks], scale, within=True) if asks else "-"


def gate_cost(asks: Sequence[Asked]) -> str:
    """Defaults minus gate off of session-level reach, paired per query, in points."""
    diff = [float(a.reached(DEFAULTS)) - float(a.reached(GATE_OFF)) for a in asks]
    return shown(diff, [a.user for a in asks], within=True) if asks else "-"


def hidden(asks: Sequence[Asked]) -> list[Asked]:
    """Queries the gate off reaches and the defaults do not."""
    return [a for a in asks if a.reached(GATE_OFF) and not a.reached(DEFAULTS)]


def line(a: Asked) -> str:
    """A hidden query: the user, its size, the query, the used memory's gate-off score and
    what the defaults returned."""
    score = max((m.score or 0.0) for m in a.found[GATE_OFF] if m.conversation_id in a.message.used)
    got = a.found[DEFAULTS]
    given = f"{len(got)} other memories" if got else "nothing"
    text = " ".join(a.message.text.split())
    short = text if len(text) <= 110 else text[:107] + "..."
    return f"{a.user} ({a.size} memories): {short!r} (used session's score {score:.2f}) -> {given}"


async def main() -> None:
    """Replay each user, ask in the three regimes, print and write."""
    cli = parser(__doc__)
    cli.add_argument("--users", type=int, default=None, help="only the first N users (trials)")
    args = cli.parse_args()
    revision = git_revision()
    users = load(count=args.users)
    url = await fresh_database("recall_bench_realmem")
    settings = Settings(database_url=url, embedding_cache_ttl=0)
    started = datetime.now()
    async with MemoryStore.connect(settings) as store:
        texts = [m.text for u in users for s in u.sessions for m in s.queries]
        texts += [m.text for u in users for _i, m in no_memory_needed(u)]
        vecs = await vectors(store.embedder, users, texts)
        embedded = datetime.now()
        asks = [a for user in users for a in await replay(store, user, vecs)]
    took = (datetime.now() - started).total_seconds()
    replayed = (datetime.now() - embedded).total_seconds()

    queries = [a for a in asks if a.kind == "query"]
    quiet = [a for a in asks if a.kind == NO_MEMORY]
    rows = [[regime, rate(queries, "reached", regime), rate(queries, "silent", regime),
             rate(queries, "returned", regime, 1.0), rate(quiet, "silent", regime)]
            for regime in REGIMES]  # fmt: skip
    strata = []
    for name, low, high in (*STRATA, ("all", 0, 10**9)):
        sel = [a for a in queries if low <= a.size < high]
        strata.append([name, f"{len(sel)} ({len({a.user for a in sel})})",
                       rate(sel, "reached", DEFAULTS), rate(sel, "reached", GATE_OFF),
                       gate_cost(sel), rate(sel, "reached", COSINE),
                       rate(sel, "silent", DEFAULTS)])  # fmt: skip
    per_user = [
        [u.name, mine[-1].size if mine else 0, len(mine),
         *(sum(a.reached(r) for a in mine) for r in REGIMES),
         sum(a.silent(DEFAULTS) for a in mine),
         f"{sum(a.silent(DEFAULTS) for a in theirs)} / {len(theirs)}"]
        for u in users
        for mine in [[a for a in queries if a.user == u.name]]
        for theirs in [[a for a in quiet if a.user == u.name]]
    ]  # fmt: skip
    gone = hidden(queries)
    gone_silent = sum(a.silent(DEFAULTS) for a in gone)
    answered = [a for a in quiet if not a.silent(DEFAULTS)]
    for a in gone:
        print(f"hidden {line(a)}")
    for a in answered:
        print(f"no memory needed, answered {a.user}: {' '.join(a.message.text.split())[:100]!r}")
    print(f"{len(asks)} messages asked in {took:.0f} s ({replayed:.0f} s after embedding)")
    examples = [line(a) for name in dict.fromkeys(a.user for a in gone)
                for a in [a for a in gone if a.user == name][:1]]  # fmt: skip
    flag = f" --users {args.users}" if args.users is not None else ""
    body = f"""## RealMem users at the defaults, gate off and cosine top-3 (issue 45)

`python benchmarks/realmem.py{flag}` on {machine()}, commit {revision}, {datetime.now():%Y-%m-%d}.
{len(users)} RealMem users (../shared/data/realmem/: {", ".join(u.name for u in users)}),
replayed session by session in the file's order: each session's query turns asked at the
session's time with only the earlier sessions stored, then its turn pairs stored (one memory a
pair, conversation id the session). {len(queries)} query turns; a hit (session level) is a
returned memory from a session the answer's `memory_used` names. "No memory needed": up to 20
user turns per user that are not queries, drawn seeded from each user's sessions after the
first, asked the same way ({len(quiet)} turns). Regimes: the store's defaults (hybrid, second
stage and gate, limit {settings.max_memories}, threshold {settings.similarity_threshold}), the
gate off (threshold 0, same ranking and limit) and plain cosine top-3 (semantic, threshold 0).
% (and memories a query) with bootstrap 95% intervals in two stages: users drawn, then each
drawn user's queries. The labels record what the simulator's assistant used: they are noisy.
Since issue 54 the second stage is fitted on these users' queries too (leave one user out,
`benchmarks/fit_second_stage.py`), so the defaults' figures here are in-sample; the held-out
ones, beside plain cosine, are in the section "second-stage".

{table(["regime", "session-level reach %", "queries silent %", "memories a query",
        "no memory needed silent %"], rows)}

By the user's size when asked (memories stored): queries (users), session-level reach %, the
gate's cost paired per query (defaults minus gate off, points; issue 45's target: at most 2
points in every stratum), cosine top-3 and the defaults' silent queries:

{table(["memories", "queries (users)", "defaults %", "gate off %", "gate's cost (points)",
        "cosine top-3 %", "defaults silent %"], strata)}

Per user: memories at the last query, queries, queries reached per regime, queries silent at
the defaults, "no memory needed" turns silent at the defaults:

{table(["user", "memories", "queries", *REGIMES, "silent at defaults",
        "no memory needed silent"], per_user)}

Queries the gate off reaches and the defaults do not: {len(gone)} of {len(queries)}
({gone_silent} with nothing returned, the others with memories of other sessions over the
threshold). One a user (user (memories when asked): query (the best score of a used session's
memory with the gate off) -> what the defaults return):

{chr(10).join(f"- {e}" for e in examples) or "- none"}

{len(asks)} messages asked in three regimes in {took:.0f} s, {replayed:.0f} s of it after the
vectors were read or embedded.
"""  # fmt: skip
    publish("realmem", body, write=not args.no_write)


if __name__ == "__main__":
    run(main)
