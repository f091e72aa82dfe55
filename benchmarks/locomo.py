"""Retrieval quality on LoCoMo (dev split): recall@k per mode, the default-threshold share,
and query latency; `--fit` refits the hybrid fusion model.

    python benchmarks/locomo.py [--fit] [--data ../shared/data/locomo_dev.json]

Each conversation is one user; one memory per consecutive turn pair ("Speaker: text" on both
sides, image captions included), dated by its session. Questions of categories 1-4 are asked;
a hit is an evidence turn's memory in the top k. Writes its table to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ROOT, fresh_database, git_revision, machine, publish, run, table

from recall.config import Settings
from recall.db.search import keyword_rows, vector_rows
from recall.search.fusion import FEATURES, Candidate, FusionModel, features
from recall.search.keywords import keywords_from_text
from recall.search.ranking import merge_candidates
from recall.store import MemoryStore

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
KS = (1, 3, 5, 10)
MODES = ("semantic", "keyword", "hybrid")
_EVIDENCE = re.compile(r"D\d+:\d+")


@dataclass
class Question:
    user: str
    text: str
    category: int
    evidence: set[str]  # memory ids
    vector: Any = None


@dataclass
class Corpus:
    turns: list[dict[str, Any]] = field(default_factory=list)
    dia_to_turn: dict[tuple[str, str], int] = field(default_factory=dict)
    questions: list[tuple[str, str, int, set[int]]] = field(default_factory=list)
    skipped_evidence: int = 0
    skipped_questions: int = 0


def _date(raw: str) -> datetime | None:
    try:
        return datetime.strptime(raw.strip(), "%I:%M %p on %d %B, %Y")
    except ValueError:
        return None


def _line(turn: dict[str, Any]) -> str:
    text = f"{turn['speaker']}: {turn['text']}"
    if turn.get("blip_caption"):
        text += f" [shares an image: {turn['blip_caption']}]"
    return text


def load(path: Path) -> Corpus:
    """Turn pairs and questions from the LoCoMo file, evidence mapped to pair indexes."""
    corpus = Corpus()
    for sample in json.loads(path.read_text()):
        user = sample["sample_id"]
        conv = sample["conversation"]
        sessions = sorted(
            (int(k.split("_")[1]) for k in conv if re.fullmatch(r"session_\d+", k)),
        )
        for n in sessions:
            turns = conv[f"session_{n}"]
            when = _date(conv.get(f"session_{n}_date_time", ""))
            pairs = [(i, i + 1) for i in range(0, len(turns) - 1, 2)]
            if len(turns) % 2 == 1 and len(turns) > 1:  # the odd last turn joins the one before
                pairs.append((len(turns) - 2, len(turns) - 1))
            for a, b in pairs:
                index = len(corpus.turns)
                corpus.turns.append(
                    {
                        "user_id": user,
                        "user_message": _line(turns[a]),
                        "ai_response": _line(turns[b]),
                        "conversation_id": f"{user}-session-{n}",
                        "created_at": when,
                        "metadata": {"dia_ids": [turns[a]["dia_id"], turns[b]["dia_id"]]},
                    }
                )
                for t in (turns[a], turns[b]):
                    corpus.dia_to_turn.setdefault((user, t["dia_id"]), index)
        for qa in sample["qa"]:
            if qa.get("category") not in CATEGORIES:
                continue
            wanted: set[int] = set()
            for entry in qa.get("evidence", []):
                ids = _EVIDENCE.findall(entry)
                if not ids:
                    corpus.skipped_evidence += 1
                for dia in ids:
                    if (user, dia) in corpus.dia_to_turn:
                        wanted.add(corpus.dia_to_turn[(user, dia)])
                    else:
                        corpus.skipped_evidence += 1
            if wanted:
                corpus.questions.append((user, qa["question"], qa["category"], wanted))
            else:
                corpus.skipped_questions += 1
    return corpus


async def candidates(
    store: MemoryStore, q: Question, pool: int
) -> tuple[list[Candidate], list[str]]:
    """The hybrid candidate list of a question, as fusion sees it, and the candidates' ids."""
    async with store.connection(q.user, read=True) as conn:
        vec = await vector_rows(
            conn,
            user_id=q.user,
            vector=q.vector,
            limit=pool,
            max_distance=2.0,
            index=None,
            ef_search=100,
        )
        kw = await keyword_rows(
            conn, user_id=q.user, keywords=keywords_from_text(q.text), vector=q.vector, limit=pool
        )
    _rows, cands = merge_candidates(vec, kw)
    return cands, [c.key for c in cands]


async def fit(store: MemoryStore, questions: list[Question]) -> FusionModel:
    """Fit the fusion model (balanced logistic regression) and report leave-one-user-out."""
    from sklearn.linear_model import LogisticRegression

    rows: list[tuple[str, list[tuple[float, ...]], list[int], list[str], Question]] = []
    for q in questions:
        cands, ids = await candidates(store, q, store.settings.hybrid_candidates)
        labels = [1 if i in q.evidence else 0 for i in ids]
        rows.append((q.user, features(cands), labels, ids, q))

    def train(subset: list[Any]) -> FusionModel:
        x = np.array([f for r in subset for f in r[1]])
        y = np.array([label for r in subset for label in r[2]])
        model = LogisticRegression(class_weight="balanced", C=1.0, max_iter=1000).fit(x, y)
        return FusionModel(
            float(model.intercept_[0]),
            tuple(float(w) for w in model.coef_[0]),  # type: ignore[arg-type]
        )

    users = sorted({r[0] for r in rows})
    held: dict[int, int] = defaultdict(int)
    for user in users:
        model = train([r for r in rows if r[0] != user])
        for r in (r for r in rows if r[0] == user):
            scores = model.relevance_of(r[1])  # the held-out conversation's features
            order = [r[3][j] for j in np.argsort(-np.array(scores), kind="stable")]
            for k in KS:
                held[k] += bool(set(order[:k]) & r[4].evidence)
    n = len(rows)
    print(
        "leave-one-conversation-out any@k: "
        + ", ".join(f"@{k} {100 * held[k] / n:.1f}" for k in KS)
    )
    final = train(rows)
    print(
        f"fitted: FusionModel(intercept={final.intercept:.4f}, weights=("
        + ", ".join(f"{w:.4f}" for w in final.weights)
        + "))"
    )
    print("features:", FEATURES)
    return final


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared/data/locomo_dev.json")
    parser.add_argument("--fit", action="store_true", help="refit the fusion model first")
    parser.add_argument("--no-write", action="store_true", help="do not touch docs/benchmarks.md")
    parser.add_argument("--candidates", type=int, default=None, help="hybrid candidates per side")
    args = parser.parse_args()

    corpus = load(args.data)
    url = await fresh_database("recall_bench_locomo")
    settings = Settings(database_url=url, embedding_cache_ttl=0)
    if args.candidates:
        settings = settings.replace(hybrid_candidates=args.candidates)
    async with MemoryStore.connect(settings) as store:
        started = time.perf_counter()
        ids = await store.add_turns(corpus.turns, batch_size=500)
        load_s = time.perf_counter() - started
        questions = [
            Question(user, text, cat, {ids[i] for i in wanted})
            for user, text, cat, wanted in corpus.questions
        ]
        for q in questions:  # embedded as search embeds a query
            q.vector = await store.embedder.embed_query(q.text)
        print(
            f"{len(corpus.turns)} memories for {len({t['user_id'] for t in corpus.turns})} "
            f"users loaded in {load_s:.1f} s; {len(questions)} questions "
            f"({corpus.skipped_questions} without usable evidence, "
            f"{corpus.skipped_evidence} evidence entries skipped)"
        )
        if args.fit:
            store.fusion = await fit(store, questions)

        hits: dict[str, dict[str, list[int]]] = {m: defaultdict(list) for m in MODES}
        latency: dict[str, list[float]] = {m: [] for m in MODES}
        for q in questions:
            for mode in MODES:
                t0 = time.perf_counter()
                found = await store.search(
                    q.user,
                    q.text,
                    limit=10,
                    similarity_threshold=0.0,
                    mode=mode,
                    query_vector=q.vector,
                )
                latency[mode].append((time.perf_counter() - t0) * 1000)
                ranked = [m.id for m in found]
                for k in KS:
                    top = set(ranked[:k])
                    hits[mode][f"any@{k}"].append(bool(top & q.evidence))
                    hits[mode][f"all@{k}"].append(q.evidence <= top)
                    hits[mode][f"any@{k}/c{q.category}"].append(bool(top & q.evidence))
        survive: dict[str, list[bool]] = {"semantic": [], "hybrid": []}
        returned: dict[str, list[int]] = {"semantic": [], "hybrid": []}
        for q in questions:
            for mode in survive:
                found = await store.search(q.user, q.text, mode=mode, query_vector=q.vector)
                survive[mode].append(bool({m.id for m in found} & q.evidence))
                returned[mode].append(len(found))

    def pct(values: list[int] | list[bool]) -> str:
        return f"{100 * sum(values) / max(len(values), 1):.1f}"

    rows = [
        [mode]
        + [pct(hits[mode][f"any@{k}"]) for k in KS]
        + [pct(hits[mode][f"all@{k}"]) for k in KS]
        for mode in MODES
    ]
    overall = table(["mode"] + [f"any@{k}" for k in KS] + [f"all@{k}" for k in KS], rows)
    per_cat = table(
        ["mode"]
        + [
            f"{name} any@5 (n={len(hits['semantic'][f'any@5/c{c}'])})"
            for c, name in CATEGORIES.items()
        ],
        [[mode] + [pct(hits[mode][f"any@5/c{c}"]) for c in CATEGORIES] for mode in MODES],
    )
    defaults = table(
        [
            "mode (limit 3, threshold 0.5)",
            "evidence reaches the agent %",
            "memories returned (mean)",
        ],
        [[m, pct(survive[m]), f"{statistics.mean(returned[m]):.2f}"] for m in survive],
    )
    lat = table(
        ["mode", "p50 ms", "p95 ms", "ratio p50 to semantic"],
        [
            [
                m,
                f"{np.percentile(latency[m], 50):.2f}",
                f"{np.percentile(latency[m], 95):.2f}",
                f"{np.percentile(latency[m], 50) / np.percentile(latency['semantic'], 50):.2f}",
            ]
            for m in MODES
        ],
    )
    body = f"""## Retrieval quality on LoCoMo (dev split)

`python benchmarks/locomo.py` on {machine()}, commit {git_revision()},
{datetime.now():%Y-%m-%d}. {len(questions)} questions (categories 1-4), one memory per turn pair,
all-MiniLM-L6-v2, fusion model {store.fusion}. Recall in % (evidence in the top k).

{overall}

Per category, any@5:

{per_cat}

With the defaults (limit 3, threshold 0.5; in hybrid mode the threshold applies to the
calibrated relevance, in semantic mode to the cosine):

{defaults}

Store query latency (precomputed query vector: database and fusion only, same run):

{lat}
"""
    publish("locomo", body, write=not args.no_write)


if __name__ == "__main__":
    run(main)
