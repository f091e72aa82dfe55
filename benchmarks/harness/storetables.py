"""`benchmarks/basestore.py`'s answers and tables: each search's exact answer (ties at the
tenth score included), the tallies by namespace size, the rows of its tables, and the verdict
against the targets of issues 30 and 38."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .items import PREFIX, Items, Query, bucket, bucket_labels, key
from .report import table
from .storephases import (
    ColdWindow,
    PutCosts,
    cold_p95,
    cold_rows,
    put_p95,
    put_rows,
)
from .timing import percentiles

OURS, PEER = "RecallStore", "AsyncPostgresStore"
K = 10


@dataclass
class Tally:
    """One store's searches of one size bucket: times (ms), recall@10 per search, short
    searches."""

    times: list[float] = field(default_factory=list)
    recall: list[float] = field(default_factory=list)
    short: int = 0


Answer = tuple[set[tuple[tuple[str, ...], str]], int]
"""A search's exact answer: every item scoring at least the tenth best (ties included), and
how many a full page holds (min(10, items under the prefix))."""
TIE = 1e-6  # scores this close to the tenth best count as ties (float32 vectors)


def exact_answer(items: Items, q: Query) -> Answer:
    """The exact (numpy) answer of `q`: within its namespace, or over every namespace."""
    every = q.namespace == PREFIX
    sims = (items.vectors if every else items.rows(q.namespace)) @ q.vector
    want = min(K, len(sims))
    tenth = -np.partition(-sims, want - 1)[want - 1]
    rows = np.flatnonzero(sims >= tenth - TIE)
    if not every:
        return {(items.namespaces[q.namespace], key(int(i))) for i in rows}, want
    found = set()
    for row in rows:
        j = int(np.searchsorted(items.starts, row, side="right")) - 1
        found.add((items.namespaces[j], key(int(row) - int(items.starts[j]))))
    return found, want


def tally(items: Items, truth: list[Answer], rounds: list[Any]) -> dict[str, dict[str, Tally]]:
    """Per store, per size bucket ("all" included): every measured search's time, recall@10
    against the exact answer (ties at the tenth score count), and whether it came back short
    (fewer than min(10, size) items). Results count by namespace and key."""
    out: dict[str, dict[str, Tally]] = {}
    for measured in rounds:
        for system, (times, found) in measured.items():
            by_bucket = out.setdefault(system, {})
            for q, ms, res, (top, want) in zip(items.queries, times, found, truth, strict=True):
                got = {(tuple(r.namespace), r.key) for r in res}
                for label in labels(items, q):
                    t = by_bucket.setdefault(label, Tally())
                    t.times.append(ms)
                    t.recall.append(min(len(got & top), want) / want)
                    t.short += len(res) < want
    return out


def labels(items: Items, q: Query) -> list[str]:
    """The rows a search counts in: its size bucket (or the prefix over every namespace),
    the row of its --large namespace if it is one, and "all"."""
    if q.namespace == PREFIX:
        return [EVERYWHERE]
    size = int(items.sizes[q.namespace])
    large = [f"one namespace of {size:,}"] if q.namespace >= items.large_from else []
    return [bucket(size), *large, "all"]


EVERYWHERE = "prefix over every namespace"


def ratio(ours: Sequence[float], peer: Sequence[float], q: float) -> float:
    """Our `q` percentile over the peer's."""
    return percentiles(ours, [q])[0] / percentiles(peer, [q])[0]


def bucket_rows(items: Items, tallies: dict[str, dict[str, Tally]]) -> list[list[object]]:
    """One row per size bucket (smallest first), then every search."""
    rows: list[list[object]] = []
    large = [f"one namespace of {int(n):,}" for n in items.sizes[items.large_from :]]
    for label in [*bucket_labels(), *large, EVERYWHERE, "all"]:
        if label not in tallies[OURS]:
            continue
        ours, peer = tallies[OURS][label], tallies[PEER][label]
        if label == EVERYWHERE:
            sizes = [int(s) for s in items.sizes]
        elif label in large:
            sizes = [int(label.rsplit(" ", 1)[1].replace(",", ""))]
        else:
            sizes = [int(s) for s in items.sizes if label == "all" or bucket(int(s)) == label]
        o50, o95 = percentiles(ours.times, [50, 95])
        p50, p95 = percentiles(peer.times, [50, 95])
        rows.append([
            label, f"{len(sizes):,} ({sum(sizes):,} items)", f"{len(ours.times):,}",
            f"{np.mean(ours.recall):.4f} / {np.mean(peer.recall):.4f}",
            f"{ours.short:,} / {peer.short:,}",
            f"{o50:.2f} / {o95:.2f}", f"{p50:.2f} / {p95:.2f}",
            f"{o50 / p50:.3f}", f"{o95 / p95:.3f}",
        ])  # fmt: skip
    return rows


def round_rows(rounds: list[Any]) -> list[list[object]]:
    """Every search of each measured round: percentiles and ratios, then their medians."""
    rows: list[list[object]] = []
    values = []
    for n, measured in enumerate(rounds, 1):
        ours, peer = measured[OURS][0], measured[PEER][0]
        row = [*percentiles(ours, [50, 95]), *percentiles(peer, [50, 95])]
        row += [row[0] / row[2], row[1] / row[3]]
        values.append(row)
        rows.append([n, *(f"{v:.2f}" for v in row[:4]), *(f"{v:.3f}" for v in row[4:])])
    medians = np.median(np.array(values), axis=0)
    rows.append(["median", *(f"{v:.2f}" for v in medians[:4]), *(f"{v:.3f}" for v in medians[4:])])
    return rows


@dataclass
class Extra:
    """What a run adds to the searches: midpoint rows, questions, puts, the cold window."""

    midpoints: int
    questions: int
    puts: list[PutCosts]
    cold: ColdWindow | None


def verdict(tallies: dict[str, dict[str, Tally]], extra: Extra) -> str:
    """The issues' targets (p95 ours/peer per row, recall@10 at least 0.99, no short
    results; puts p95 <= 2x; the cold window p95 <= 2x), each met or missed, by this run's
    figures."""
    limits = {EVERYWHERE: 1.5}  # issue 38: every bucket and large namespace 1.0
    said = []
    for label, ours in tallies[OURS].items():
        if label == "all":
            continue
        p95 = ratio(ours.times, tallies[PEER][label].times, 95)
        limit = limits.get(label, 1.0)
        recall = float(np.mean(ours.recall))
        ok = p95 <= limit and recall >= 0.99 and ours.short == 0
        said.append(
            f"{label}: {'met' if ok else 'missed'} (p95 ours/peer {p95:.3f} <= {limit}, "
            f"recall@10 {recall:.4f} >= 0.99, short {ours.short})"
        )
    if extra.puts:
        p95 = put_p95(extra.puts)
        said.append(f"puts: {'met' if p95 <= 2 else 'missed'} (p95 ours/peer {p95:.3f} <= 2)")
    if extra.cold is not None:
        p95 = cold_p95(extra.cold)
        said.append(f"cold window: {'met' if p95 <= 2 else 'missed'} (p95 {p95:.3f} <= 2)")
    return "; ".join(said)


def phase_tables(extra: Extra) -> str:
    """The puts' and the cold window's tables (empty when not run)."""
    out = ""
    if extra.puts:
        headers = ["our index over every namespace", "puts", "ours p50 / p95 ms",
                   "peer p50 / p95 ms", "p50 ours/peer", "p95 ours/peer"]  # fmt: skip
        out += f"""Single puts into the largest namespace, in turns (a new item each):

{table(headers, put_rows(extra.puts))}

"""
    if extra.cold is not None:
        c = extra.cold
        at = "never" if c.indexed_at is None else f"{c.indexed_at:.0f} s"
        headers = ["since our load ended", "searches", "recall@10 ours / peer",
                   "ours p50 / p95 ms", "peer p50 / p95 ms", "p50 ours/peer",
                   "p95 ours/peer"]  # fmt: skip
        out += f"""The cold window: a fresh namespace of {c.items:,} items loaded by `abatch`
(the peer in {c.load_s[PEER]:.1f} s, then ours in {c.load_s[OURS]:.1f} s), then searched at once,
in turns; our search went through the namespace's index from {at} after our load ended:

{table(headers, cold_rows(c))}

"""
    return out
