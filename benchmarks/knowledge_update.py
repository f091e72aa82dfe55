"""LongMemEval dev at the defaults with and without issue 37's post-step (a source before its
restatements, the newest statement on a slot first), on the same candidates and scores.

    python benchmarks/knowledge_update.py [--no-write]

Each question's haystack is one user (benchmarks/harness/longmemeval.py; the vectors from
.recall/longmemeval-vectors.npz); the question goes through `MemoryStore.candidates` and the
shipped second stage at its `question_date`, as `MemoryStore.search` does, and both ways of
filling the 3 slots at threshold 0.5 take the same scores: the first 3 at or over the threshold
(today), and `recall.search.restatements.arrange` (issue 37). LongMemEval's turns carry no
provenance (they were not written by the writer node), so only the slot rule can act here.
Reach: a memory of an answer session returned; first: the first one returned is. Intervals:
bootstrap 95% over questions; the difference is paired (benchmarks/harness/bootstrap.py). The
shipped second stage was fitted on these questions among others: the levels are in-sample, the
difference between the two ways is what this measures. Writes docs/benchmarks.md (section
"knowledge-update").
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import numpy as np
from harness import longmemeval as lme
from harness.bootstrap import shown
from harness.db import fresh_database, settle
from harness.report import git_revision, machine, publish, table
from harness.run import parser, run

from recall.config import Settings
from recall.search.ranking import cosine
from recall.search.restatements import arrange
from recall.search.second_stage import SecondStage
from recall.search.verdict import Verdict
from recall.store import MemoryStore

LIMIT = 3
THRESHOLD = 0.5


def plain(order: Sequence[int], scores: Sequence[float]) -> list[int]:
    """Today's slots: the first `LIMIT` at or over the threshold."""
    out = []
    for i in order[:LIMIT]:
        if scores[i] < THRESHOLD:
            break
        out.append(i)
    return out


async def main() -> None:
    """Load, ask, print and write."""
    args = parser(__doc__).parse_args()
    revision = git_revision()
    records = lme.load()
    url = await fresh_database("recall_bench_knowledge_update")
    settings = Settings(database_url=url, embedding_cache_ttl=0)
    results: list[tuple[str, str, dict[str, float]]] = []
    async with MemoryStore.connect(settings) as store:
        stage = store.ranker
        if not isinstance(stage, SecondStage):
            raise SystemExit("the default model has no second stage")
        vectors = await lme.vectors(store.embedder, records)
        evidence: list[frozenset[str]] = []
        for record in records:
            ids = await store.add_turns(lme.items(record, vectors), batch_size=5000)
            evidence.append(frozenset(
                i for i, t in zip(ids, record.turns, strict=True)
                if t["metadata"]["session"] in record.answer_sessions
            ))  # fmt: skip
        await settle(url)
        for record, wanted in zip(records, evidence, strict=True):
            vector = np.asarray(await store.embedder.embed_query(record.question))
            k = max(stage.candidates, LIMIT)
            rows, near = await store.candidates(record.user, record.question, vector, k)
            if not rows:
                got: dict[str, list[str]] = {"today": [], "issue 37": []}
            else:
                scored = stage.score(record.question, vector, rows, near, now=record.asked)
                nearness = [cosine(r.distance) or 0.0 for r in rows]
                new = arrange(record.question, rows, scored.order, scored.scores, nearness,
                              Verdict("hybrid", THRESHOLD), LIMIT)  # fmt: skip
                got = {
                    "today": [str(rows[i].id) for i in plain(scored.order, scored.scores)],
                    "issue 37": [str(rows[i].id) for i, _s in new],
                }
            measures = {}
            for name, found in got.items():
                measures[f"{name} reach"] = float(bool(set(found) & wanted))
                measures[f"{name} first"] = float(bool(found) and found[0] in wanted)
            results.append((record.qid, record.kind, measures))
    rows_out = []
    for label, kinds in (("knowledge-update", {"knowledge-update"}),
                         ("all dev questions", {r.kind for r in records})):  # fmt: skip
        sel = [(q, m) for q, kind, m in results if kind in kinds]
        groups = [q for q, _m in sel]
        for measure in ("reach", "first"):
            before = [m[f"today {measure}"] for _q, m in sel]
            after = [m[f"issue 37 {measure}"] for _q, m in sel]
            diff = [a - b for a, b in zip(after, before, strict=True)]
            changed = sum(a != b for a, b in zip(after, before, strict=True))
            rows_out.append([label, len(sel), measure, shown(before, groups),
                             shown(after, groups), shown(diff, groups), changed])  # fmt: skip
    body = f"""## LongMemEval dev with issue 37's post-step

`python benchmarks/knowledge_update.py` on {machine()}, commit {revision},
{datetime.now():%Y-%m-%d}. LongMemEval_S dev (one user per question, asked at its
`question_date`), the shipped second stage's scores at the defaults (limit {LIMIT}, threshold
{THRESHOLD}), the slots filled today's way and by issue 37's post-step
(`recall.search.restatements`) from the same scores. These turns have no provenance, so only
the newest-statement-on-a-slot rule can act. Reach: a memory of an answer session returned;
first: the first returned is one. % with bootstrap 95% intervals over questions; the
difference is paired; "questions changed": where the two differ. In-sample levels (the shipped
stage was fitted on these questions among others). Target (issue 37): knowledge-update reach
no worse than today.

{table(["questions", "n", "measure", "today %", "issue 37 %", "difference (points)",
        "questions changed"], rows_out)}
"""  # fmt: skip
    publish("knowledge-update", body, write=not args.no_write)


if __name__ == "__main__":
    run(main)
