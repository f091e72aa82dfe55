"""The same results before and after a change that should change none (issue 39): every dev
question of LoCoMo (../shared/data/locomo_dev.json, each conversation one user holding all of
its turn pairs) and of LongMemEval (../shared/data/longmemeval_s_dev.json.gz, each question's
haystack one user) asked at the store's defaults (`store.search(user, text)`: limit 3,
threshold 0.5, the default mode), the returned memories' texts and scores (rounded to 1e-9)
dumped to a JSON file; `--compare A B` lists the questions whose returned memories differ,
counts those that differ in their scores alone, and writes both to docs/benchmarks.md
('same-results').

    PYTHONPATH=/work/main/src:benchmarks python benchmarks/same_results.py --out before.json
    PYTHONPATH=src:benchmarks python benchmarks/same_results.py --out after.json
    python benchmarks/same_results.py --compare before.json after.json

Every question is asked at one fixed moment (`--now`, by default 2026-06-15T12:00:00Z): a
question that names a time ("last summer") is read relative to when it is asked, so two dumps
made on different days would otherwise differ for that reason alone (issue 44). A `recall`
from before issue 44 takes no moment: give `--now clock` to ask at the clock's.

The `recall` that runs is the one on the import path (PYTHONPATH: the checkout under test);
the dump names it and its commit. Two fresh databases holding the same dev sets once answered
32 of 955 questions differently with the same code (b9bae67): ties were broken by the
memories' random ids. Since migration 0023 ties go by what a rebuild keeps, and two `--fresh`
runs give 0 differences (issue 44):

    python benchmarks/same_results.py --fresh --out a.json
    python benchmarks/same_results.py --fresh --out b.json
    python benchmarks/same_results.py --compare a.json b.json

Without `--fresh`, the first run stores the dev sets in database `recall_bench_same_results`
on the benchmarks' server and leaves it, and later runs ask it again.
Vectors are embedded once and kept: LongMemEval's turns in .recall/longmemeval-vectors.npz
(benchmarks/harness/longmemeval.py), LoCoMo's turns and both sets' questions in
.recall/same-results-vectors.npz, so every run searches with the same vectors.
"""

from __future__ import annotations

import json
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any

import harness.longmemeval as lme
import numpy as np
from harness.corpus import load
from harness.db import fresh_database, kept_database, settle
from harness.report import ROOT, publish
from harness.run import parser, run
from harness.vectorcache import embed_missing, key, saved

import recall
from recall.config import Settings
from recall.memory import Memory, make_turn
from recall.store import MemoryStore

CACHE = ROOT / ".recall" / "same-results-vectors.npz"
DIGITS = 9  # scores rounded to 1e-9
DATABASE = "recall_bench_same_results"
ASKED = "2026-06-15T12:00:00+00:00"  # the moment every question is asked, unless --now says

Asked = tuple[str, str, str, np.ndarray]  # (key, user, question, its vector)


def _row(memory: Memory) -> list[Any]:
    score = None if memory.score is None else round(float(memory.score), DIGITS)
    return [memory.user_message, memory.ai_response, score]


async def _locomo(store: MemoryStore, table: dict[str, np.ndarray], stored: bool) -> list[Asked]:
    """Store LoCoMo dev (each conversation one user) unless `stored`; its questions, not asked
    yet."""
    corpus = load()
    cut = store.settings.max_message_length
    docs = [
        make_turn(t["user_id"], t["user_message"], t["ai_response"], max_length=cut).text
        for t in corpus.turns
    ]
    await embed_missing(store.embedder, docs, "doc", table, CACHE, "same results")
    await embed_missing(
        store.embedder, [q[1] for q in corpus.questions], "query", table, CACHE, "same results"
    )
    if not stored:
        items = (
            {**t, "embedding": table[key("doc", d)]}
            for t, d in zip(corpus.turns, docs, strict=True)
        )
        await store.add_turns(items, batch_size=2000)
    return [
        (f"locomo {n} {user}: {text}", user, text, table[key("query", text)])
        for n, (user, text, _category, _evidence) in enumerate(corpus.questions)
    ]


async def _longmemeval(
    store: MemoryStore, table: dict[str, np.ndarray], stored: bool
) -> list[Asked]:
    """Store LongMemEval dev (each question's haystack one user) unless `stored`; its
    questions."""
    records = lme.load()
    turns = await lme.vectors(store.embedder, records)
    await embed_missing(
        store.embedder, [r.question for r in records], "query", table, CACHE, "same results"
    )
    for record in [] if stored else records:
        await store.add_turns(lme.items(record, turns), batch_size=5000)
    return [
        (f"longmemeval {r.qid}: {r.question}", r.user, r.question, table[key("query", r.question)])
        for r in records
    ]


def _revision() -> tuple[str, str]:
    """The checkout whose `recall` runs, and its commit (`git describe --dirty`)."""
    tree = Path(recall.__file__).resolve().parents[2]
    described = subprocess.run(  # noqa: S603 - git with this script's own arguments
        ["git", "-C", str(tree), "describe", "--always", "--dirty"],  # noqa: S607 - git on PATH
        capture_output=True,
        text=True,
        check=False,
    )
    return str(tree), described.stdout.strip() or "unknown"


async def dump(out: Path, fresh: bool, now: datetime | None) -> None:
    """Store both dev sets (unless a previous run left them and not `fresh`), ask every
    question at the defaults at the moment `now` (None: the clock's, as a `recall` from before
    issue 44 asks), and write what came back to `out`."""
    tree, revision = _revision()
    if fresh:
        url, stored = await fresh_database(DATABASE), False
    else:
        url, stored = await kept_database(DATABASE)
    print("the dev sets are stored already" if stored else "storing the dev sets", flush=True)
    table = saved(CACHE)
    results: dict[str, list[list[Any]]] = {}
    async with MemoryStore.connect(Settings(database_url=url, embedding_cache_ttl=0)) as store:
        asked = [*await _locomo(store, table, stored), *await _longmemeval(store, table, stored)]
        if not stored:
            await settle(url)  # VACUUM (ANALYZE), CHECKPOINT: no autovacuum during the asking
        for key, user, text, vector in asked:
            if now is None:  # a recall before issue 44 has no `now`
                found = await store.search(user, text, query_vector=vector)
            else:
                found = await store.search(user, text, query_vector=vector, now=now)
            results[key] = [_row(m) for m in found]
    asked_at = "clock" if now is None else now.isoformat()
    body = json.dumps(
        {"tree": tree, "revision": revision, "now": asked_at, "fresh": fresh, "results": results},
        indent=1,
    )
    out.write_text(body)  # noqa: ASYNC240  # once, at the end
    print(f"{len(results)} questions asked at {revision} ({tree}): {out}")


def _texts(found: list[list[Any]] | None) -> list[list[Any]]:
    return [m[:2] for m in found or []]


def compare(before: Path, after: Path) -> tuple[str, str, int, int, int, str, str]:
    """Print every question whose returned memories (texts, in order) differ: the two
    revisions, how many differ, of how many, how many got at least one memory in the first
    dump, where the two dumps' memories were stored, and how many others differ in their
    scores alone (to 1e-9) and by at most how much."""
    a, b = json.loads(before.read_text()), json.loads(after.read_text())
    where = (
        "each dump on the dev sets stored anew in a fresh database (--fresh)"
        if a.get("fresh") and b.get("fresh")
        else "on one database"
    )
    ra, rb = a["results"], b["results"]
    asked = ra.keys() | rb.keys()
    differ = sorted(q for q in asked if _texts(ra.get(q)) != _texts(rb.get(q)))
    for q in differ:
        print(f"- {q}\n  {a['revision']}: {ra.get(q)}\n  {b['revision']}: {rb.get(q)}")
    scored = [q for q in asked if q not in differ and ra.get(q) != rb.get(q)]
    most = max(
        (abs(x[2] - y[2]) for q in scored for x, y in zip(ra[q], rb[q], strict=True)),
        default=0.0,
    )
    scores = f"{len(scored)} more differ in their scores alone, by at most {most:.1e}"
    answered = sum(1 for found in ra.values() if found)
    return a["revision"], b["revision"], len(differ), len(asked), answered, where, scores


async def main() -> None:
    """Dump, or compare two dumps (and write the count)."""
    options = parser(__doc__)
    options.add_argument("--out", type=Path, help="where to write the dump")
    options.add_argument(
        "--fresh", action="store_true", help="store the dev sets again in a new database"
    )
    options.add_argument("--compare", nargs=2, type=Path, metavar=("A", "B"))
    options.add_argument(
        "--now",
        default=ASKED,
        help=f"the moment every question is asked, ISO 8601 (default {ASKED}), or 'clock'",
    )
    args = options.parse_args()
    if args.compare:
        first, second, differ, asked, answered, where, scores = compare(*args.compare)
        body = (
            f"Same results (python benchmarks/same_results.py --compare; issues 39 and 44): "
            f"{differ} of {asked} dev questions (LoCoMo and LongMemEval, at the store's "
            f"defaults, {where}; {answered} of them get at least one memory) differ in the "
            f"returned memories (their texts, in order) between {first} and {second}; "
            f"{scores} (scores to 1e-9)."
        )
        publish("same-results", body, write=not args.no_write)
        return
    if args.out is None:
        raise SystemExit("give --out FILE (or --compare A B)")
    now = None if args.now == "clock" else datetime.fromisoformat(args.now)
    await dump(args.out, args.fresh, now)


if __name__ == "__main__":
    run(main)
