"""The gate dump's rows (benchmarks/gate_dump.py): one message asked at threshold 0 (limit 10,
explain, intent on: the retrieval node's call), the first result's gate parts and the top 10's
logits, scores, cosines and evidence flags, one JSON line per message under .recall/gate-dump/."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from recall.memory import Memory
from recall.store import MemoryStore

from .report import ROOT

OUT = ROOT / ".recall" / "gate-dump"
DUMP = OUT / "dump.jsonl"  # every data set's rows, joined
HELD_OUT = OUT / "intent-held-out.json"
"""Each text the asking model is fitted on, with its intent from the fold that did not see it
(benchmarks/fit_intent.py writes it): what benchmarks/gate_rule.py chooses a rule by."""
TOP = 10  # the dump's limit: the top 10 per message
FIT_REALMEM = frozenset(
    f"realmem-{name}" for name in ("adeleke_okonjo", "ethan_hunt", "kenta_tanaka", "kim_ji_young")
)
"""The RealMem users whose messages are fitted and chosen on (benchmarks/gate_rule.py and
benchmarks/fit_intent.py, decision 0039); the other four are only reported."""


def load_rows(path: Path = DUMP) -> list[dict[str, Any]]:
    """The rows of a dump file (by default the joined one), in order."""
    with path.open() as lines:
        return [json.loads(line) for line in lines if line.strip()]


def where(
    *,
    id: str | None = None,
    ids: Collection[str] = (),
    said: str | None = None,
    conversations: Collection[str | None] = (),
) -> Callable[[Memory], bool]:
    """Whether a memory is a message's evidence: the memory `id`, one of `ids`, the turn whose
    user message is `said`, or one of `conversations` (nothing given: never)."""
    return lambda m: (
        (id is not None and m.id == id)
        or m.id in ids
        or (said is not None and m.user_message == said)
        or m.conversation_id in conversations
    )


def entry(m: Memory, evidence: bool) -> dict[str, Any]:
    """One memory of a row's top 10."""
    why = m.explanation or {}
    return {"logit": why.get("logit"), "score": m.score, "evidence": evidence, "cos": m.similarity}


class Dump:
    """The rows of one data set, written to .recall/gate-dump/dump-<dataset>.jsonl as they
    come (flushed), with the count of top 3s at limit 10 unlike the limit-3 search."""

    def __init__(self, dataset: str) -> None:
        self.dataset = dataset
        OUT.mkdir(parents=True, exist_ok=True)
        self.path = OUT / f"dump-{dataset}.jsonl"
        self.file: TextIO = self.path.open("w")
        self.kinds: Counter[tuple[str, str]] = Counter()
        self.checked = [0, 0]  # searches compared at limit 3, top 3s that differ
        self.started = time.perf_counter()

    async def ask(
        self,
        store: MemoryStore,
        user: str,
        text: str,
        *,
        now: datetime | None,
        vector: Any = None,
        check: bool = True,
    ) -> list[Memory]:
        """The dump's call: threshold 0, limit 10, explain, intent on (find's default). With
        `check`, the same call at the store's limit (3), to count top 3s that differ."""
        result = await store.find(user, text, TOP, 0.0, explain=True, now=now,
                                  query_vector=vector)  # fmt: skip
        found = list(result.memories)
        if check:
            small = await store.find(user, text, similarity_threshold=0.0, now=now,
                                     query_vector=vector)  # fmt: skip
            self.checked[0] += 1
            self.checked[1] += [m.id for m in small.memories] != [m.id for m in found[:3]]
        return found

    def row(
        self,
        *,
        split: str,
        user: str,
        size: int,
        kind: str,
        text: str,
        found: Sequence[Memory],
        is_evidence: Callable[[Memory], bool],
        **extra: Any,
    ) -> None:
        """Write one message's row: who asked it, of how many memories, what kind of message,
        the first result's match, intent and gate, the top 10; `extra` as given."""
        top = list(found)[:TOP]
        first = (top[0].explanation or {}) if top else None
        row = {
            "dataset": self.dataset,
            "split": split,
            "user": user,
            "size": size,
            "kind": kind,
            "text": text,
            "match": first.get("match") if first is not None else None,
            "intent": first.get("intent") if first is not None else None,
            "gate": first.get("gate") if first is not None else None,
            "top": [entry(m, bool(is_evidence(m))) for m in top],
            **extra,
        }
        self.file.write(json.dumps(row) + "\n")
        self.file.flush()
        self.kinds[(split, kind)] += 1
        n = sum(self.kinds.values())
        if n % 500 == 0:
            took = time.perf_counter() - self.started
            print(f"  {self.dataset}: {n} rows, {took:.0f} s", flush=True)

    def close(self) -> None:
        """Close the file; print the rows per split and kind, and the limit-3 check."""
        self.file.close()
        took = time.perf_counter() - self.started
        print(f"{self.dataset}: {sum(self.kinds.values())} rows in {took:.0f} s -> {self.path}")
        for (split, kind), n in sorted(self.kinds.items()):
            print(f"  {split or '-'} / {kind}: {n}")
        if self.checked[0]:
            print(f"  top 3 at limit 10 unlike the limit-3 search: {self.checked[1]} of "
                  f"{self.checked[0]}")  # fmt: skip


def concat(datasets: Sequence[str]) -> list[Path]:
    """Join the data sets' files that exist, in `datasets`' order, into `DUMP`."""
    parts = [OUT / f"dump-{d}.jsonl" for d in datasets if (OUT / f"dump-{d}.jsonl").exists()]
    with DUMP.open("w") as out:
        for p in parts:
            out.write(p.read_text())
    return parts
