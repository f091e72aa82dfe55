"""Issue 45's gate dump: every message six benchmarks ask, asked once more at threshold 0, with
the gate's parts and the top 10's logits, scores, cosines and evidence flags, for the analysis
of the retrieval gate (benchmarks/gate_rule.py reads it).

    python benchmarks/gate_dump.py [--only fact probe restatement realmem locomo lme]

Each data set is built as its benchmark builds it, in one fresh database
`recall_gate_<dataset>` on the benchmarks' server, the store's default model and settings
(restatement: its run's `sources_first` and `link_repeated_turns`):

- fact (benchmarks/fact_probe.py): all eight fact users, each thread stored turn by turn a
  minute apart; fact questions, never-said questions and small talk.
- probe (benchmarks/probe.py): the paraphrase-probe user; its questions and small talk.
- restatement (benchmarks/restatement_probe.py): its control user only, each fact said once;
  the first question per fact.
- realmem (benchmarks/realmem.py): every user's sessions in order, each session's queries and
  no-memory-needed messages asked before it is stored (at the session's time).
- locomo (benchmarks/locomo.py): the full and small-user regimes' questions, and the three
  silence regimes' never-said and small-talk messages.
- lme (benchmarks/knowledge_update.py): LongMemEval dev, each question of its own haystack.

Each message goes to `store.find(user, text, 10, 0.0, explain=True, now=...)` (intent on, the
retrieval node's call); one JSON line per message in .recall/gate-dump/dump-<dataset>.jsonl
(written as they come): data set, split, user, the user's memories, kind, text, the first
result's `match`, `intent` and `gate`, the top 10 (logit, score, cosine, whether it is the
message's evidence), and the data set's own fields. The files of the data sets run so far are
then joined into .recall/gate-dump/dump.jsonl (`load_rows` reads it). Except in locomo, the
same message is asked again at the store's limit (3), and the top 3s that differ are counted.

Time: fact and realmem are asked at their benchmarks' moments (the fact users' NOW, each
session's time), lme at each question's date; probe, restatement and locomo, which their
benchmarks ask at the clock's now, at NOW here, probe's and restatement's turns stored a
minute apart up to a minute before it (as fact_probe.py does), so a rerun asks the same.

Vectors: realmem, lme and locomo read .recall/realmem-vectors.npz,
.recall/longmemeval-vectors.npz and .recall/locomo-vectors.npz (what is missing embedded into
them; LongMemEval's embedding takes about an hour). Writes nothing under docs/.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from harness.db import fresh_database, settle
from harness.factusers import NOW
from harness.gatedump import DUMP, OUT, Dump, concat, load_rows, where
from harness.regimes import LABELS
from harness.report import ROOT, git_revision, machine, publish, table
from harness.run import moment, parser, run

from recall.config import Settings
from recall.store import MemoryStore

__all__ = ["DATASETS", "DUMP", "OUT", "load_rows", "main"]

# what the other scripts call their users and read (a script is not another script's library:
# tests/unit/test_benchmarks.py); every message is asked at the fact users' moment, `NOW`
PROBE_USER = "probe-user"  # benchmarks/probe.py
RESTATEMENT_DATA = ROOT / "benchmarks" / "data" / "restatement_probe.json"
RESTATEMENT_USER = "restating-user"  # benchmarks/restatement_probe.py

LOCOMO_VECTORS = ROOT / ".recall" / "locomo-vectors.npz"


def settings_for(url: str, **more: Any) -> Settings:
    return Settings(database_url=url, embedding_cache_ttl=0, **more)


async def fact() -> None:
    """benchmarks/fact_probe.py: all eight users, asked at its NOW."""
    from harness.factusers import fact_users

    now = moment(NOW)
    url = await fresh_database("recall_gate_fact")
    dump = Dump("fact")
    async with MemoryStore.connect(settings_for(url)) as store:
        for user in fact_users(split=None):
            uid = f"fact-{user.name.lower()}"
            facts: dict[int, str] = {}
            ids = set()
            for i, turn in enumerate(user.thread):
                memory = await store.add_turn(
                    uid, turn.user, turn.assistant, conversation_id=f"{uid}-told",
                    created_at=now - timedelta(minutes=len(user.thread) - i),
                )  # fmt: skip
                ids.add(memory.id)
                if turn.fact is not None:
                    facts[turn.fact] = memory.id
            asks: list[tuple[str, str, str | None]] = [
                ("fact", q.text, facts[q.fact]) for q in user.questions
            ]
            asks += [("never said", t, None) for t in user.never_said]
            asks += [("small talk", t, None) for t in user.small_talk]
            for kind, text, wanted in asks:
                found = await dump.ask(store, uid, text, now=now)
                dump.row(split=user.split, user=uid, size=len(ids), kind=kind, text=text,
                         found=found, is_evidence=where(id=wanted))  # fmt: skip
    dump.close()


async def probe() -> None:
    """benchmarks/probe.py: the paraphrase-probe user (bge-small, the default model)."""
    from harness.heldout import paraphrase_probe, small_talk

    now = moment(NOW)
    data, lines = paraphrase_probe(), small_talk()
    url = await fresh_database("recall_gate_probe")
    dump = Dump("probe")
    n = len(data.thread)
    async with MemoryStore.connect(settings_for(url)) as store:
        ids = await store.add_turns(
            {"user_id": PROBE_USER, "user_message": t.user, "ai_response": t.assistant,
             "conversation_id": "probe-told", "created_at": now - timedelta(minutes=n - i)}
            for i, t in enumerate(data.thread)
        )  # fmt: skip
        facts = [""] * len(data.questions)
        for turn, memory in zip(data.thread, ids, strict=True):
            if turn.fact is not None:
                facts[turn.fact] = memory
        size = len(set(ids))
        for text, fact_n in data.questions:
            found = await dump.ask(store, PROBE_USER, text, now=now)
            dump.row(split="", user=PROBE_USER, size=size, kind="fact", text=text, found=found,
                     is_evidence=where(id=facts[fact_n]))  # fmt: skip
        for text in lines:
            found = await dump.ask(store, PROBE_USER, text, now=now)
            dump.row(split="", user=PROBE_USER, size=size, kind="small talk", text=text,
                     found=found, is_evidence=where())  # fmt: skip
    dump.close()


async def restatement() -> None:
    """benchmarks/restatement_probe.py: its control user only (its run's settings)."""

    now = moment(NOW)
    data = json.loads(RESTATEMENT_DATA.read_text())
    url = await fresh_database("recall_gate_restatement")
    dump = Dump("restatement")
    settings = settings_for(url, sources_first=True, link_repeated_turns=True)
    control = f"{RESTATEMENT_USER}-control"
    n = len(data["facts"])
    async with MemoryStore.connect(settings) as store:
        ids = set()
        for i, f in enumerate(data["facts"]):
            memory = await store.add_turn(control, f["said"], "Thanks, I'll remember that.",
                                          created_at=now - timedelta(minutes=n - i))  # fmt: skip
            ids.add(memory.id)
        for f in data["facts"]:
            text = f["asked"][0]
            found = await dump.ask(store, control, text, now=now)
            dump.row(split="", user=control, size=len(ids), kind="fact", text=text, found=found,
                     is_evidence=where(said=f["said"]))  # fmt: skip
    dump.close()


async def realmem() -> None:
    """benchmarks/realmem.py: each session's messages asked before it is stored."""
    from harness import realmem as rm

    users = rm.load()
    url = await fresh_database("recall_gate_realmem")
    dump = Dump("realmem")
    async with MemoryStore.connect(settings_for(url)) as store:
        texts = [m.text for u in users for s in u.sessions for m in s.queries]
        texts += [m.text for u in users for _i, m in rm.no_memory_needed(u)]
        vecs = await rm.vectors(store.embedder, users, texts)
        for user in users:
            others: dict[int, list[rm.Message]] = {}
            for i, message in rm.no_memory_needed(user):
                others.setdefault(i, []).append(message)
            stored: set[str] = set()
            for i, session in enumerate(user.sessions):
                for message in [*session.queries, *others.get(i, [])]:
                    vector = rm.query_vector(message.text, vecs)
                    found = await dump.ask(store, user.user_id, message.text, now=session.at,
                                           vector=vector)  # fmt: skip
                    query = message.query_id is not None
                    dump.row(
                        split="", user=user.user_id, size=len(stored),
                        kind="fact" if query else "no memory needed", text=message.text,
                        found=found,
                        is_evidence=where(conversations=message.used),
                        query_id=message.query_id, category=message.category,
                        session=session.uuid, at=session.at.isoformat(),
                    )  # fmt: skip
                stored.update(await store.add_turns(rm.items(user, session, vecs), writers=1))
            print(f"  realmem {user.name}: {len(stored)} memories", flush=True)
    dump.close()


async def locomo() -> None:
    """benchmarks/locomo.py: regimes full and small-user, and the three silence regimes."""
    from harness.corpus import load
    from harness.heldout import small_talk
    from harness.regimes import REGIMES, Vectors, targets, turn_items
    from harness.silence import SILENCES, silence
    from harness.vectorcache import embed_missing, key, saved

    from recall.memory import make_turn

    now = moment(NOW)
    corpus = load()
    regimes = {name: REGIMES[name](corpus) for name in ("full", "small")}
    url = await fresh_database("recall_gate_locomo")
    dump = Dump("locomo")
    async with MemoryStore.connect(settings_for(url)) as store:
        cut = store.settings.max_message_length
        docs = [make_turn(t["user_id"], t["user_message"], t["ai_response"], max_length=cut).text
                for t in corpus.turns]  # fmt: skip
        lines = small_talk()
        quiet = {n: silence(n, corpus, regimes[SILENCES[n]], lines) for n in SILENCES}
        queries = [q[1] for q in corpus.questions]
        queries += [a.text for s in quiet.values() for a in s.asks]
        table = saved(LOCOMO_VECTORS)
        await embed_missing(store.embedder, docs, "doc", table, LOCOMO_VECTORS, "locomo vectors")
        await embed_missing(store.embedder, queries, "query", table, LOCOMO_VECTORS,
                            "locomo vectors")  # fmt: skip
        vectors = Vectors([table[key("doc", d)] for d in docs], None,
                          [table[key("query", q[1])] for q in corpus.questions])  # fmt: skip
        sizes: dict[str, Counter[str]] = {}
        tgts = {}
        for name, regime in regimes.items():
            ids = await store.add_turns(turn_items(corpus, regime, vectors), batch_size=2000)
            tgts[name] = targets(corpus, regime, ids)
            owner = dict(zip(ids, (item.user for item in regime.items), strict=True))
            sizes[name] = Counter(owner.values())
            print(f"  locomo {name}: {len(owner)} memories of {len(sizes[name])} users",
                  flush=True)  # fmt: skip
        await settle(url)
        for name, regime in regimes.items():
            for asked, target in zip(regime.asks, tgts[name], strict=True):
                _conv, text, category, _w = corpus.questions[asked.question]
                found = await dump.ask(store, asked.user, text, now=now, check=False,
                                       vector=vectors.queries[asked.question])  # fmt: skip
                dump.row(split=LABELS[name], user=asked.user, size=sizes[name][asked.user],
                         kind="fact", text=text, found=found,
                         is_evidence=where(ids=target.evidence),
                         source="question", category=category,
                         n_evidence=len(target.evidence))  # fmt: skip
        for n, s in quiet.items():
            holder = SILENCES[n]
            kind = "small talk" if n == "small-talk" else "never said"
            for a in s.asks:
                found = await dump.ask(store, a.user, a.text, now=now, check=False,
                                       vector=table[key("query", a.text)])  # fmt: skip
                dump.row(split=LABELS[holder], user=a.user, size=sizes[holder][a.user],
                         kind=kind, text=a.text, found=found, is_evidence=where(),
                         source=n, from_conversation=a.source)  # fmt: skip
    dump.close()


async def lme() -> None:
    """benchmarks/knowledge_update.py's LongMemEval dev: each question of its own haystack,
    asked at the question's date."""
    from harness import longmemeval as lm

    records = lm.load()
    url = await fresh_database("recall_gate_lme")
    dump = Dump("lme")
    async with MemoryStore.connect(settings_for(url)) as store:
        have = await lm.vectors(store.embedder, records)
        started = time.perf_counter()
        evidence: list[frozenset[str]] = []
        sizes: list[int] = []
        for n, record in enumerate(records):
            ids = await store.add_turns(lm.items(record, have), batch_size=5000)
            evidence.append(frozenset(
                i for i, t in zip(ids, record.turns, strict=True)
                if t["metadata"]["session"] in record.answer_sessions
            ))  # fmt: skip
            sizes.append(len(set(ids)))
            if (n + 1) % 25 == 0:
                print(f"  lme: {n + 1} users stored, {time.perf_counter() - started:.0f} s",
                      flush=True)  # fmt: skip
        await settle(url)
        for record, wanted, size in zip(records, evidence, sizes, strict=True):
            vector = np.asarray(await store.embedder.embed_query(record.question))
            found = await dump.ask(store, record.user, record.question, now=record.asked,
                                   vector=vector)  # fmt: skip
            dump.row(split="", user=record.user, size=size, kind="fact", text=record.question,
                     found=found, is_evidence=where(ids=wanted),
                     question_type=record.kind, asked=record.asked.isoformat())  # fmt: skip
    dump.close()


DATASETS: dict[str, Callable[[], Coroutine[Any, Any, None]]] = {
    "fact": fact,
    "probe": probe,
    "restatement": restatement,
    "realmem": realmem,
    "locomo": locomo,
    "lme": lme,
}


async def main() -> None:
    """Dump the data sets asked for (all by default), join the files there are, and publish
    how many messages of each kind the joined file holds."""
    cli = parser(__doc__)
    names = ", ".join(DATASETS)
    cli.add_argument("--only", nargs="+", choices=list(DATASETS), metavar="DATASET",
                     help=f"the data sets to dump (default: all: {names})")  # fmt: skip
    args = cli.parse_args()
    revision = git_revision()
    started = time.perf_counter()
    for name in args.only or list(DATASETS):
        print(f"== {name} ({datetime.now(UTC):%H:%M:%S})", flush=True)
        await DATASETS[name]()
    parts = concat(list(DATASETS))
    took = time.perf_counter() - started
    counts = Counter((r["dataset"], r["split"] or "", r["kind"]) for r in load_rows(DUMP))
    lines = [[d, split, kind, n] for (d, split, kind), n in sorted(counts.items())]
    body = f"""## The gate dump: every benchmark message asked once, gate off (issue 45)

`python benchmarks/gate_dump.py` on {machine()}, commit {revision}, {datetime.now():%Y-%m-%d},
{took:.0f} s. `{DUMP.relative_to(ROOT)}` joins {", ".join(p.name for p in parts)}: each message
asked once at threshold 0 (limit 10, explained), with the gate's `match` and `intent` and the
top 10's logits and evidence; `benchmarks/gate_rule.py` reads it.

{table(["data set", "split", "kind", "messages"], lines)}
"""
    publish("gate-dump", body, write=not args.no_write)


if __name__ == "__main__":
    run(main)
