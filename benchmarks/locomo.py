"""Retrieval quality on LoCoMo (dev split): recall@k per mode, the default-threshold share,
and query latency; `--fit` refits the hybrid fusion model.

    python benchmarks/locomo.py [--fit] [--data ../shared/data/locomo_dev.json]
                                [--candidates 20] [--conversations N]

Each conversation is one user; one memory per consecutive turn pair ("Speaker: text" on both
sides, image captions included), dated by its session. Questions of categories 1-4 are asked;
a hit is an evidence turn's memory in the top k. Writes docs/benchmarks.md (section "locomo").
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from lib.corpus import CATEGORIES, load
from lib.db import fresh_database
from lib.report import git_revision, machine, publish, table
from lib.run import parser, run
from lib.timing import percentiles

from recall.config import RetrievalMode, Settings
from recall.db.search import keyword_rows, vector_rows
from recall.search.fusion import FEATURES, Candidate, FusionModel, features
from recall.search.keywords import keywords_from_text
from recall.search.ranking import merge_candidates
from recall.store import MemoryStore

KS = (1, 3, 5, 10)
MODES: tuple[RetrievalMode, ...] = ("semantic", "keyword", "hybrid")


@dataclass
class Question:
    """A question asked of one user's memories, with the ids of its evidence's memories."""

    user: str
    text: str
    category: int
    evidence: set[str]  # memory ids
    vector: Any = None


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
    """Load the conversations, ask every question in every mode; print and write."""
    options = parser(__doc__, data=True)
    options.add_argument("--fit", action="store_true", help="refit the fusion model first")
    options.add_argument("--candidates", type=int, default=None, help="hybrid candidates per side")
    options.add_argument(
        "--conversations", type=int, default=None, help="the first N conversations only"
    )
    args = options.parse_args()
    revision = git_revision()
    corpus = load(args.data, args.conversations)
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
        survive: dict[RetrievalMode, list[bool]] = {"semantic": [], "hybrid": []}
        returned: dict[RetrievalMode, list[int]] = {"semantic": [], "hybrid": []}
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
    p = {m: percentiles(latency[m], [50, 95]) for m in MODES}
    lat = table(
        ["mode", "p50 ms", "p95 ms", "ratio p50 to semantic"],
        [[m, f"{p50:.2f}", f"{p95:.2f}", f"{p50 / p['semantic'][0]:.2f}"]
         for m, (p50, p95) in p.items()],
    )  # fmt: skip
    given = [("--fit", args.fit), ("--candidates", args.candidates),
             ("--conversations", args.conversations)]  # fmt: skip
    command = " ".join(["python benchmarks/locomo.py"] + [
        name if value is True else f"{name} {value}" for name, value in given if value
    ])  # fmt: skip
    body = f"""## Retrieval quality on LoCoMo (dev split)

`{command}` on {machine()}, commit {revision},
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
