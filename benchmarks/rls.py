"""What row-level security costs a search: the same exact search (`recall.search_exact`) as
the tables' owner (no policy), as the store runs it (role recall_app, one call that sets
`recall.user_id` itself), and inside a scoped transaction (BEGIN, the key, the search, COMMIT:
how every search ran before migration 0005), alternating in one run.

    python benchmarks/rls.py [--rows 100000] [--queries 1000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import fresh_database, git_revision, machine, publish, run, table
from pgvector.psycopg import register_vector_async

from recall.config import Settings
from recall.db.pool import connect_once
from recall.db.rls import scope, use_app_role
from recall.db.sql import query
from recall.store import MemoryStore
from recall.testing import FakeEmbeddings

DIMS = 384


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    rng = np.random.default_rng(11)
    url = await fresh_database("recall_bench_rls")
    users = [f"user-{i}" for i in range(args.rows // 200)]
    async with MemoryStore.connect(Settings(database_url=url), embeddings=FakeEmbeddings(DIMS)):
        pass  # migrations and the embedding space
    async with MemoryStore.connect(
        Settings(database_url=url), embeddings=FakeEmbeddings(DIMS)
    ) as s:
        vectors = rng.normal(size=(args.rows, DIMS)).astype(np.float32)
        await s.add_turns(
            ({"user_id": users[i % len(users)], "user_message": f"memory {i}", "ai_response": "ok",
              "embedding": vectors[i]} for i in range(args.rows)),
            batch_size=5000,
        )  # fmt: skip
    owner = await connect_once(url)
    app = await connect_once(url)
    for conn in (owner, app):
        await register_vector_async(conn)
    assert await use_app_role(app)
    await owner.execute("ANALYZE recall.memories")
    times: dict[str, list[float]] = {
        "owner, no policy": [],
        "recall_app, one call (the store)": [],
        "recall_app, scoped transaction": [],
    }
    for i in range(args.queries + 100):
        user = users[i % len(users)]
        params = {"user_id": user, "query": rng.normal(size=DIMS).astype(np.float32),
                  "limit": 3, "max_distance": 2.0}  # fmt: skip
        for label in list(times) if i % 2 else list(reversed(times)):
            t0 = time.perf_counter()
            if label.startswith("owner"):
                await (await owner.execute(query("search_exact"), params)).fetchall()
            elif label.endswith("(the store)"):
                await (await app.execute(query("search_exact"), params)).fetchall()
            else:
                async with scope(app, user_id=user):
                    await (await app.execute(query("search_exact"), params)).fetchall()
            if i >= 100:
                times[label].append((time.perf_counter() - t0) * 1000)
    await owner.close()
    await app.close()
    rows = [
        [label, f"{np.percentile(v, 50):.3f}", f"{np.percentile(v, 95):.3f}"]
        for label, v in times.items()
    ]
    base, rls, scoped = (np.percentile(v, 50) for v in times.values())
    body = f"""## Cost of row-level security

`python benchmarks/rls.py --rows {args.rows} --queries {args.queries}` on {machine()}, commit
{git_revision()}: the exact search of a {args.rows // len(users)}-memory user, alternating
between the two ways in one run.

{table(["how", "p50 ms", "p95 ms"], rows)}

At p50, the store's one call takes {rls / base:.2f}x the owner's time ({rls - base:+.3f} ms: the
key set inside the call and the policy's condition), and the scoped transaction
{scoped / base:.2f}x ({scoped - base:+.3f} ms: three more round trips; decision 0007).
"""
    publish("rls", body, write=not args.no_write)


if __name__ == "__main__":
    run(main)
