"""The fixed costs migrations 0008 and 0009 removed, as ratios measured in one run.

    python benchmarks/overheads.py [--rows 100000] [--queries 500] [--writes 600]

Loads --rows memories (LoCoMo turn pairs as texts, random unit vectors): a quarter for one
large user (as in the latency benchmark, whose 100k population has a 25k-memory user; it is
not searched here, but it makes users' sizes skewed, as they are in use) and the rest for
users of 10 to 1,000 memories (log-uniform, the latency benchmark's typical users), then:

- searches: the same query list through four variants, phase after phase, repeated: the exact
  search and policy of migrations 0004/0005 (before), the policy that reads the key once
  (0008 step 1), the scan without a tuple store (step 2), and the function as it is (step 3:
  one generic plan). The earlier variants are re-created from the migration files in a scratch
  schema; the policy is switched between phases and put back at the end. Every variant must
  return the same rows in the same order.
- writes: one turn through a scoped transaction (BEGIN, the key, INSERT, COMMIT: before 0009)
  and through recall.add_memory (one call), alternating turn by turn.

All as role recall_app, as the store runs. Writes docs/benchmarks.md (section "overheads").
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ROOT, fresh_database, git_revision, machine, publish, run, table
from latency import LOCOMO, conversation_pairs, typical_sizes
from pgvector.psycopg import register_vector_async
from psycopg.types.json import Jsonb

from recall.config import Settings
from recall.db.pool import connect_once
from recall.db.rls import scope, use_app_role
from recall.db.sql import query
from recall.memory import make_turn
from recall.store import MemoryStore
from recall.testing import FakeEmbeddings

DIMS = 384
MIGRATIONS = ROOT / "migrations"
OLD_RULE = (
    "(user_id = current_setting('recall.user_id', true)"
    " OR current_setting('recall.all_users', true) = 'on')"
)
NEW_RULE = (
    "(user_id = (SELECT current_setting('recall.user_id', true))"
    " OR (SELECT current_setting('recall.all_users', true)) = 'on')"
)
SEARCH = "SELECT * FROM {fn}(%(user_id)s, %(query)s, %(max_distance)s, %(limit)s)"
# label, policy, function
VARIANTS = [
    ("before (0004 policy, 0005 function)", OLD_RULE, "bench_old.search_exact_0005"),
    ("0008 step 1: key read once per query", NEW_RULE, "bench_old.search_exact_0005"),
    ("step 2: + no tuple store (OFFSET 0)", NEW_RULE, "bench_old.search_exact_custom"),
    ("step 3: + one generic plan (as shipped)", NEW_RULE, "recall.search_exact"),
]


async def set_policy(owner: Any, rule: str) -> None:
    """Give recall.memories' policy `rule` (one of the two above) for reads and writes."""
    await owner.execute(f"ALTER POLICY own_rows ON recall.memories USING {rule} WITH CHECK {rule}")


def function_from(migration: str, new_name: str, *, drop_settings: bool = False) -> str:
    """recall.search_exact's definition in `migration`, under another name."""
    text = next(MIGRATIONS.glob(f"{migration}_*.sql")).read_text()
    match = re.search(
        r"CREATE (?:OR REPLACE )?FUNCTION recall\.search_exact\(.*?\n\$\$;", text, re.S
    )
    assert match, f"no recall.search_exact in migration {migration}"
    body = match.group(0).replace("recall.search_exact", new_name, 1)
    body = re.sub(r"^CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", body)
    if drop_settings:
        body = body.replace("SET plan_cache_mode = force_generic_plan\n", "")
    return body


def pcts(values: list[float]) -> tuple[float, float]:
    return float(np.percentile(values, 50)), float(np.percentile(values, 95))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--writes", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=5, help="phases per variant")
    parser.add_argument("--data", type=Path, default=LOCOMO, help="LoCoMo JSON (the texts)")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    rng = np.random.default_rng(13)
    pairs = conversation_pairs(args.data)
    large = args.rows // 4
    sizes = typical_sizes(args.rows - large, rng)
    users = [f"user-{i}" for i in range(len(sizes))]  # the searched ones
    url = await fresh_database("recall_bench_overheads")
    settings = Settings(database_url=url)
    async with MemoryStore.connect(settings, embeddings=FakeEmbeddings(DIMS)) as store:
        vectors = rng.normal(size=(args.rows, DIMS)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        everyone = [("large-0", large), *zip(users, sizes, strict=True)]
        rows = ((u, j) for u, n in everyone for j in range(n))
        await store.add_turns(
            ({"user_id": u, "user_message": f"{pairs[(i + j) % len(pairs)][0]} ({j})",
              "ai_response": pairs[(i + j) % len(pairs)][1], "embedding": vectors[i]}
             for i, (u, j) in enumerate(rows)),
            batch_size=5000,
        )  # fmt: skip
    owner = await connect_once(url)
    app = await app_connection(url)
    try:
        await owner.execute("VACUUM (ANALYZE) recall.memories")
        await owner.execute("CREATE SCHEMA bench_old")
        await owner.execute(function_from("0005", "bench_old.search_exact_0005").encode())
        await owner.execute(
            function_from("0008", "bench_old.search_exact_custom", drop_settings=True).encode()
        )
        await owner.execute("GRANT USAGE ON SCHEMA bench_old TO recall_app")
        await owner.execute("GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA bench_old TO recall_app")
        small = [u for u, n in zip(users, sizes, strict=True) if n <= 40]
        searches = {
            "typical users": await run_searches(owner, url, users, args, rng),
            "users of 10-40 memories": await run_searches(owner, url, small, args, rng),
        }
        writes = await run_writes(app, pairs, args, rng)
    finally:
        await set_policy(owner, NEW_RULE)
        await owner.close()
        await app.close()
    report(args, sizes, searches, writes)


async def app_connection(url: str) -> Any:
    """A connection as the store's: pgvector types, role recall_app; a fresh plan cache."""
    conn = await connect_once(url)
    await register_vector_async(conn)
    if not await use_app_role(conn):
        await conn.close()
        raise SystemExit("cannot SET ROLE recall_app: the searches would skip row-level security")
    return conn


async def run_searches(
    owner: Any, url: str, users: list[str], args: argparse.Namespace, rng: np.random.Generator
) -> dict[str, list[float]]:
    app = await app_connection(url)
    try:
        return await search_rounds(owner, app, users, args, rng)
    finally:
        await app.close()


async def search_rounds(
    owner: Any, app: Any, users: list[str], args: argparse.Namespace, rng: np.random.Generator
) -> dict[str, list[float]]:
    queries = []
    for i in range(args.queries):
        q = rng.normal(size=DIMS).astype(np.float32)
        queries.append({"user_id": users[i % len(users)], "query": q / np.linalg.norm(q),
                        "max_distance": 1.0, "limit": 3})  # fmt: skip
    times: dict[str, list[float]] = {label: [] for label, _p, _f in VARIANTS}
    results: dict[str, list[Any]] = {}
    for round_ in range(args.rounds + 1):  # the first round warms up and is not counted
        for label, rule, fn in VARIANTS:
            await set_policy(owner, rule)
            sql = SEARCH.format(fn=fn).encode()
            found = []
            for params in queries:
                t0 = time.perf_counter()
                cur = await app.execute(sql, params, prepare=True)
                found.append(await cur.fetchall())
                if round_:
                    times[label].append((time.perf_counter() - t0) * 1000)
            results.setdefault(label, found)
    first = results[VARIANTS[0][0]]
    for label, found in results.items():
        if found != first:
            raise SystemExit(f"{label}: results differ from the 0005 function's")
    return times


async def run_writes(
    app: Any, pairs: list[tuple[str, str]], args: argparse.Namespace, rng: np.random.Generator
) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {"scoped transaction (before 0009)": [],
                                     "recall.add_memory, one call": []}  # fmt: skip
    before, after = times
    for i in range(args.writes + 50):
        said, replied = pairs[i % len(pairs)]
        for label in (before, after) if i % 2 else (after, before):
            turn = make_turn(f"writer-{i % 7}", f"{said} (write {i} {label})", replied)
            vector = rng.normal(size=DIMS).astype(np.float32)
            params = {
                "user_id": turn.user_id, "conversation_id": None,
                "user_message": turn.user_message, "ai_response": turn.ai_response,
                "created_at": None, "metadata": Jsonb(turn.metadata),
                "content_hash": turn.content_hash, "embedding": vector / np.linalg.norm(vector),
                "embedding_model": "fake-hash-384", "kind": turn.kind,
            }  # fmt: skip
            t0 = time.perf_counter()
            if label == before:
                async with scope(app, user_id=turn.user_id):
                    await (await app.execute(query("insert_memory"), params)).fetchone()
            else:
                await (await app.execute(query("add_memory"), params)).fetchone()
            if i >= 50:
                times[label].append((time.perf_counter() - t0) * 1000)
    return times


def report(
    args: argparse.Namespace,
    sizes: list[int],
    searches: dict[str, dict[str, list[float]]],
    writes: dict[str, list[float]],
) -> None:
    search_rows = []
    for who, times in searches.items():
        base50, base95 = pcts(next(iter(times.values())))
        for label, values in times.items():
            p50, p95 = pcts(values)
            search_rows.append([who, label, f"{p50:.3f}", f"{p95:.3f}", f"{p50 / base50:.2f}",
                                f"{p95 / base95:.2f}"])  # fmt: skip
    w_before, w_after = (pcts(v) for v in writes.values())
    write_rows = [
        [label, f"{p50:.3f}", f"{p95:.3f}", f"{p50 / w_before[0]:.2f}", f"{p95 / w_before[1]:.2f}"]
        for label, (p50, p95) in zip(writes, (w_before, w_after), strict=True)
    ]
    headers = ["variant", "p50 ms", "p95 ms", "p50 / before", "p95 / before"]
    body = f"""## Fixed costs of a search and a write (migrations 0008 and 0009)

`python benchmarks/overheads.py --rows {args.rows} --queries {args.queries} --writes
{args.writes}` on {machine()}, commit {git_revision()}. Searches of {len(sizes)} users of
{min(sizes)} to {max(sizes):,} memories, next to one user of {args.rows // 4:,} (LoCoMo texts,
random vectors), role recall_app. Searches: the same
{args.queries} exact searches (limit 3) per variant and round, {args.rounds} rounds of
phases after a warm-up round, for all the typical users in turn and for the smallest only
(each list on a new connection, so with a new plan cache);
every variant returned the same rows in the same order. How much the generic plan (step 3)
saves depends on the users a connection served: PL/pgSQL keeps planning each call as long as
plans made for those users look cheaper than the generic one, as they do for small users.
Writes: one turn at a time with a precomputed vector, the two ways alternating.

{table(["searches of", *headers], search_rows)}

{table(headers, write_rows)}
"""
    publish("overheads", body, write=not args.no_write)


if __name__ == "__main__":
    run(main)
