"""The stores of `basestore.py` (and `store_breadth.py`): RecallStore and LangGraph's
AsyncPostgresStore, each on a database of its own, loaded through `abatch` with the same items,
or reused from a run before (`--keep`)."""

from __future__ import annotations

import argparse
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

import psycopg
from langgraph.store.base import BaseStore, IndexConfig, PutOp
from langgraph.store.postgres.aio import AsyncPostgresStore
from langgraph.store.postgres.base import PostgresIndexConfig
from psycopg import sql

from recall import RecallStore
from recall.config import Settings
from recall.db.pool import connect_once

from .data import DIMS
from .db import fresh_database, kept_database, settle
from .items import Items
from .storephases import OURS, PEER

TABLES = {OURS: ("recall.store_items", "recall.store_vectors"), PEER: ("store", "store_vectors")}
BATCH = 2000  # puts per `abatch` when loading
EF_CONSTRUCTION = Settings().hnsw_ef_construction  # the setting's default


@dataclass
class Loaded:
    """A store's database: its URL, and the load's seconds (None: kept from a run before)."""

    url: str
    load_s: float | None


async def item_count(url: str, items_table: str) -> int:
    """The rows of `items_table` (-1 when there is no such table yet)."""
    conn = await connect_once(url)
    try:
        name = sql.Identifier(*items_table.split("."))
        cur = await conn.execute(sql.SQL("SELECT count(*) FROM {}").format(name))
        row = await cur.fetchone()
        return int(row[0]) if row else -1
    except psycopg.errors.UndefinedTable:
        return -1
    finally:
        await conn.close()


def database_name(system: str, args: argparse.Namespace) -> str:
    """The database of one store's data at this size."""
    who = "recall" if system == OURS else "langgraph"
    large = "_".join(str(n) for n in args.large)
    data = "_real" if args.data == "real" else ""
    # our graph built with another ef_construction than the setting's default is another load
    built = getattr(args, "ef_construction", None)
    efc = f"_efc{built}" if system == OURS and built not in (None, EF_CONSTRUCTION) else ""
    return f"recall_bench_basestore{data}_{who}_{args.items}_{args.namespaces}_{large}{efc}"


@asynccontextmanager
async def opened(
    system: str, url: str, items: Items, ef_construction: int = EF_CONSTRUCTION
) -> AsyncIterator[BaseStore]:
    """One store on `url`, with the shared `embed` (the precomputed vectors), open until the
    block ends (ours building its graphs with `ef_construction`)."""
    if system == OURS:
        index: IndexConfig = {"dims": DIMS, "embed": items.embed, "fields": ["text"]}
        # the query cache off: the peer has none, and each search's embed call is timed
        settings = Settings(
            database_url=url, embedding_cache_ttl=0, hnsw_ef_construction=ef_construction
        )
        async with RecallStore.connect(url, index=index, settings=settings) as ours:
            yield ours
    else:
        peer_index: PostgresIndexConfig = {"dims": DIMS, "embed": items.embed, "fields": ["text"]}
        async with AsyncPostgresStore.from_conn_string(url, index=peer_index) as peer:
            await peer.setup()
            yield peer


async def load(system: str, store: BaseStore, items: Items, url: str) -> float:
    """Every item through `abatch` in batches of BATCH puts, then the tables vacuumed, analyzed
    and checkpointed (before any timing); the load's seconds."""
    t0 = time.perf_counter()
    ops: list[PutOp] = []
    for op in items.puts():
        ops.append(op)
        if len(ops) >= BATCH:
            await store.abatch(ops)
            ops = []
    if ops:
        await store.abatch(ops)
    load_s = time.perf_counter() - t0
    await settle(url, *TABLES[system])
    return load_s


async def open_loaded(
    stack: AsyncExitStack, system: str, args: argparse.Namespace, items: Items
) -> tuple[BaseStore, Loaded]:
    """One store, open until `stack` closes, on a fresh database loaded with `items`, or (with
    --keep) on the database a run before loaded with the same items."""
    name = database_name(system, args)
    url, existed = (await kept_database(name)) if args.keep else ("", False)
    reuse = existed and await item_count(url, TABLES[system][0]) == int(items.sizes.sum())
    url = url if reuse else await fresh_database(name)
    built = getattr(args, "ef_construction", None) or EF_CONSTRUCTION
    store = await stack.enter_async_context(opened(system, url, items, built))
    load_s = None if reuse else await load(system, store, items, url)
    print(f"{system}: {'reused' if load_s is None else f'loaded in {load_s:.0f} s'}", flush=True)
    return store, Loaded(url, load_s)
