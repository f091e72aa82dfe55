"""Fit the learned second stage and its gate (issue 29, decision 0024) on the LoCoMo dev split,
report every figure leave-one-conversation-out, and write the weights the package ships.

    python benchmarks/fit_second_stage.py [--keep 0.98] [--cache PATH] [--no-write]

What it fits (src/recall/search/second_stage.py): the ranker (logistic regression over the
candidates' features and the query-memory vector products), the intent model (logistic
regression over the query's vector: questions about a user's life against small talk and
generic requests) and the gate (logistic regression over the query's features), all on the
candidates the store itself brings (`MemoryStore.candidates`), so what is fitted is what is
served. The cases, each a message asked of one user:
- own: LoCoMo's questions asked of their conversation (full regime), of a small user (its
  evidence sessions and two others), and of a conversation holding every question's echo
  (repeated; evaluated only); and the new users' questions of benchmarks/data/gate_training.json
  (facts told in one thread, asked in other words);
- other: the other conversations' questions with their speakers renamed as this
  conversation's (benchmarks/harness/silence.py), one per small user, and the other new users';
- chat: the small talk and generic requests of gate_training.json.
Held-out files (small_talk.json, paraphrase_probe.json) are never read here.

Leave-one-conversation-out: for each conversation, every model is fitted without any case that
carries its data (its questions, its memories, its renamed questions, the small-talk lines and
new users assigned to its fold) and scores its cases. The gate's offset is its operating point:
the smallest that keeps `--keep` of the held-out own questions whose evidence the ranker puts
in the top 3. The shipped weights are then fitted on every case. Writes
src/recall/search/second_stage/<model>.json and docs/benchmarks.md (section "second-stage").
"""

from __future__ import annotations

import json
import math
import pickle
import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from harness.corpus import Corpus, load
from harness.db import fresh_database, settle
from harness.regimes import REGIMES, Regime, embed, targets, turn_items
from harness.report import ROOT, git_revision, machine, publish, table
from harness.run import parser, run
from harness.silence import rename, renamings
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

from recall.config import Settings
from recall.embeddings.bge import BGE_MODEL_NAME, BgeSmallEmbeddings
from recall.search.candidates import vector_of
from recall.search.features import (
    GATE_FEATURES,
    RANK_FEATURES,
    gate_features,
    query_facts,
    rank_features,
)
from recall.search.second_stage import LinearModel, SecondStage
from recall.store import MemoryStore

TRAINING = ROOT / "benchmarks" / "data" / "gate_training.json"
OUT = ROOT / "src" / "recall" / "search" / "second_stage"
CANDIDATES = 25  # per side: cosine and BM25 (the research found 15 to 40 level)
RANKER_C = 0.05  # inverse regularisation of the ranker, whose 384 products would over-fit
NEW_WEIGHT = 10.0  # in the ranker, a new user's case weighs as much as ten LoCoMo ones: few
NEW_GATE_WEIGHT = 5.0  # in the gate, five: more and it learns new users' small talk over others
CHAT_WEIGHT = 3.0  # small-talk lines are fewer than questions, and silence on them is firm
INTENT_KEEP = 0.998  # share of the held-out questions the intent lets through
SLOPE = 0.1  # how fast a candidate's score falls below the best one's, per unit of logit
THRESHOLDS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
LIMIT = 3


@dataclass
class Case:
    """A message asked of one user, and what its candidates were."""

    regime: str
    kind: str  # own, other, chat
    user: str
    text: str
    vector: np.ndarray
    evidence: frozenset[str]
    groups: frozenset[int]  # the conversations (folds) whose data it carries
    weight: float = 1.0
    ids: list[str] = field(default_factory=list)
    x: np.ndarray = field(default_factory=lambda: np.zeros((0, len(RANK_FEATURES))))
    cosines: list[float] = field(default_factory=list)
    facts: Any = None
    labels: np.ndarray = field(default_factory=lambda: np.zeros(0))
    # filled per fold
    logits: np.ndarray = field(default_factory=lambda: np.zeros(0))
    gate: float = 0.0
    intent: float = 0.0

    @property
    def fold(self) -> int:
        """The conversation it is scored in."""
        return min(self.groups)


def first_person(text: str, speakers: Sequence[str]) -> str:
    """A question about a speaker asked as the speaker would ask it ("What did I ...")."""
    for name in speakers:
        text = re.sub(r"\b" + re.escape(name) + r"'s\b", "my", text)
        text = re.sub(r"\b" + re.escape(name) + r"\b", "I", text)
    return text


def new_user_turns(training: dict[str, Any], index: int) -> list[dict[str, Any]]:
    """A training new user's thread: the filler turns, then its facts, a minute apart."""
    start = datetime(2026, 1, 1, 9, tzinfo=UTC)
    told = [*training["filler"], *training["new_users"][index]]
    return [
        {"user_message": t["user_message"], "ai_response": t["ai_response"],
         "conversation_id": f"new-{index}-told", "created_at": start + timedelta(minutes=i)}
        for i, t in enumerate(told)
    ]  # fmt: skip


async def build(store: MemoryStore, corpus: Corpus, training: dict[str, Any]) -> list[Case]:
    """Store every regime's users, embed every message once, and collect each case's
    candidates and features through the store."""
    convs = sorted(corpus.speakers)
    fold = {c: i for i, c in enumerate(convs)}
    vectors = await embed(store, corpus, echoes=True)
    regimes: dict[str, Regime] = {name: REGIMES[name](corpus) for name in ("full", "small")}
    regimes["repeated"] = REGIMES["repeated"](corpus)
    targets_of = {}
    for name, regime in regimes.items():
        ids = await store.add_turns(turn_items(corpus, regime, vectors), batch_size=2000)
        targets_of[name] = targets(corpus, regime, ids)
    new_ids: list[list[str]] = []
    for i in range(len(training["new_users"])):
        turns = new_user_turns(training, i)
        new_ids.append(await store.add_turns({**t, "user_id": f"new-{i}"} for t in turns))
    await settle(store.settings.database_url or "")  # statistics before the searches

    emb = store.embedder
    chat = training["small_talk"]
    chat_vectors = [await emb.embed_query(t) for t in chat]
    new_questions = [[f["question"] for f in u] for u in training["new_users"]]
    new_vectors = [[await emb.embed_query(q) for q in qs] for qs in new_questions]
    cases: list[Case] = []
    # own questions: full, small, repeated
    for name, regime in regimes.items():
        for ask, wanted in zip(regime.asks, targets_of[name], strict=True):
            conv, text, _cat, _ev = corpus.questions[ask.question]
            cases.append(Case(name, "own", ask.user, text, vectors.queries[ask.question],
                              wanted.evidence, frozenset({fold[conv]})))  # fmt: skip
    # first-person forms of the full regime's questions: intent positives only
    fp_texts = [first_person(q[1], corpus.speakers[q[0]]) for q in corpus.questions]
    fp_vectors = [await emb.embed_query(t) for t in fp_texts]
    # renamed questions of the other conversations, asked of each full user
    names = renamings(corpus)
    renamed: dict[tuple[int, str], np.ndarray] = {}
    for n, (source, text, _cat, _ev) in enumerate(corpus.questions):
        for target in convs:
            if target == source:
                continue
            moved = rename(text, names[(source, target)])
            renamed[(n, target)] = await emb.embed_query(moved)
            cases.append(Case("full", "other", target, moved, renamed[(n, target)],
                              frozenset(), frozenset({fold[source], fold[target]})))  # fmt: skip
    # small talk asked of every full user; one renamed question and one line per small user
    rng = random.Random(29)
    for target in convs:
        for j, (line, vec) in enumerate(zip(chat, chat_vectors, strict=True)):
            cases.append(Case("full", "chat", target, line, vec, frozenset(),
                              frozenset({fold[target], j % len(convs)}), CHAT_WEIGHT))  # fmt: skip
    small_users = sorted({a.user for a in regimes["small"].asks})
    for user in small_users:
        conv = next(c for c in convs if user.startswith(c + "-"))
        n = rng.choice([k for k, q in enumerate(corpus.questions) if q[0] != conv])
        source = corpus.questions[n][0]
        moved = rename(corpus.questions[n][1], names[(source, conv)])
        cases.append(Case("small", "other", user, moved, renamed[(n, conv)], frozenset(),
                          frozenset({fold[conv], fold[source]})))  # fmt: skip
        j = rng.randrange(len(chat))
        cases.append(Case("small", "chat", user, chat[j], chat_vectors[j], frozenset(),
                          frozenset({fold[conv], j % len(convs)}), CHAT_WEIGHT))  # fmt: skip
    # new users: own questions, the other new users' questions, small talk
    for i, qs in enumerate(new_questions):
        group = i % len(convs)
        facts = new_ids[i][len(training["filler"]) :]
        for k, (q, vec) in enumerate(zip(qs, new_vectors[i], strict=True)):
            cases.append(Case("new", "own", f"new-{i}", q, vec, frozenset({facts[k]}),
                              frozenset({group}), NEW_WEIGHT))  # fmt: skip
        for o, other in enumerate(new_questions):
            if o != i:
                for q, vec in zip(other, new_vectors[o], strict=True):
                    cases.append(Case("new", "other", f"new-{i}", q, vec, frozenset(),
                                      frozenset({group, o % len(convs)}), NEW_WEIGHT))  # fmt: skip
        for j, (line, vec) in enumerate(zip(chat, chat_vectors, strict=True)):
            cases.append(Case("new", "chat", f"new-{i}", line, vec, frozenset(),
                              frozenset({group, j % len(convs)}), NEW_WEIGHT))  # fmt: skip
    for n, case in enumerate(cases):
        rows, near = await store.candidates(case.user, case.text, case.vector, CANDIDATES)
        case.ids = [str(r.id) for r in rows]
        case.facts = query_facts(case.text, rows)
        case.x = rank_features(case.facts, rows, near, CANDIDATES)
        case.cosines = [1.0 - float(rows[i].distance) for i in near]
        case.labels = np.array([int(i in case.evidence) for i in case.ids])
        for r in rows:
            EMBEDDINGS.setdefault(str(r.id), vector_of(r).astype(np.float32))
        if n % 1000 == 0:
            print(f"candidates: {n} of {len(cases)} cases", flush=True)
    INTENT_EXTRA.extend(
        (np.asarray(v), fold[q[0]]) for v, q in zip(fp_vectors, corpus.questions, strict=True)
    )
    return cases


EMBEDDINGS: dict[str, np.ndarray] = {}
INTENT_EXTRA: list[tuple[np.ndarray, int]] = []  # first-person question vectors, by fold
PERSONAL: list[tuple[np.ndarray, int]] = []  # the training file's personal questions, by fold


def products(case: Case) -> np.ndarray:
    """The query-memory vector products of a case's candidates."""
    if not case.ids:
        return np.zeros((0, len(case.vector)))
    stacked: np.ndarray = np.vstack([EMBEDDINGS[i] for i in case.ids]).astype(np.float64)
    out: np.ndarray = stacked * case.vector[None, :]
    return out


@dataclass
class Fitted:
    """The three models of one fit."""

    ranker: LinearModel
    product_weights: np.ndarray
    intent: np.ndarray
    intent_intercept: float
    gate: LinearModel


def _linear(names: Sequence[str], scaler: StandardScaler, model: LogisticRegression) -> LinearModel:
    n = len(names)
    return LinearModel(tuple(names), scaler.mean_[:n].copy(), scaler.scale_[:n].copy(),
                       model.coef_[0][:n].copy(), float(model.intercept_[0]))  # fmt: skip


def fit_ranker(cases: Sequence[Case]) -> tuple[LinearModel, np.ndarray]:
    """The ranker over own cases (rank features and products), the products folded onto the
    raw scale."""
    own = [c for c in cases if c.kind == "own" and c.regime in ("full", "small", "new") and c.ids]
    x = np.vstack([np.hstack([c.x, products(c)]) for c in own])
    y = np.concatenate([c.labels for c in own])
    w = np.concatenate([[c.weight] * len(c.ids) for c in own])
    scaler = StandardScaler().fit(x)
    model = LogisticRegression(C=RANKER_C, max_iter=3000)
    model.fit(scaler.transform(x), y, sample_weight=w)
    ranker = _linear(RANK_FEATURES, scaler, model)
    n = len(RANK_FEATURES)
    pw = model.coef_[0][n:] / scaler.scale_[n:]
    shift = float(np.sum(model.coef_[0][n:] * scaler.mean_[n:] / scaler.scale_[n:]))
    ranker = LinearModel(ranker.features, ranker.mean, ranker.scale, ranker.weights,
                         ranker.intercept - shift)  # fmt: skip
    return ranker, pw


def fit_intent(cases: Sequence[Case], excluded: int | None) -> tuple[np.ndarray, float]:
    """Questions about a user's life (own full and new cases, the first-person forms and the
    training file's personal questions) against small talk and generic requests."""
    pos = [c.vector for c in cases if c.kind == "own" and c.regime in ("full", "new")]
    pos += [v for v, f in INTENT_EXTRA if f != excluded]
    pos += [v for v, f in PERSONAL if f != excluded]
    seen: set[str] = set()
    neg = []
    for c in cases:
        if c.kind == "chat" and c.text not in seen:
            seen.add(c.text)
            neg.append(c.vector)
    x = np.vstack(pos + neg)
    y = np.r_[np.ones(len(pos)), np.zeros(len(neg))]
    model = LogisticRegression(C=1.0, max_iter=3000, class_weight="balanced").fit(x, y)
    return model.coef_[0].copy(), float(model.intercept_[0])


def score(cases: Iterable[Case], ranker: LinearModel, pw: np.ndarray, intent: np.ndarray,
          intent_b: float) -> list[np.ndarray]:  # fmt: skip
    """Each case's ranker logits (stored on it) and gate features (returned)."""
    out = []
    for c in cases:
        c.logits = ranker.logits(c.x) + (products(c) @ pw if c.ids else 0.0)
        lg = float(c.vector @ intent + intent_b)
        out.append(gate_features(c.facts, c.x, np.asarray(c.logits), c.cosines, lg))
    return out


def answered_in_top(case: Case, k: int = LIMIT) -> bool:
    """Whether the ranker puts an evidence memory in its top k."""
    if not len(case.ids):
        return False
    order = np.argsort(-case.logits, kind="stable")[:k]
    return bool(case.labels[order].any())


def fit_all(train: Sequence[Case], excluded: int | None) -> Fitted:
    """The three models on `train` (the gate's label: an own case whose evidence the ranker
    puts in its top 3)."""
    ranker, pw = fit_ranker(train)
    intent, intent_b = fit_intent(train, excluded)
    g = np.vstack(score(train, ranker, pw, intent, intent_b))
    y = np.array([int(c.kind == "own" and answered_in_top(c)) for c in train])
    w = np.array([c.weight * (NEW_GATE_WEIGHT / NEW_WEIGHT if c.regime == "new" else 1.0)
                  for c in train])  # fmt: skip
    scaler = StandardScaler().fit(g)
    model = LogisticRegression(C=1.0, max_iter=3000).fit(scaler.transform(g), y, sample_weight=w)
    return Fitted(ranker, pw, intent, intent_b, _linear(GATE_FEATURES, scaler, model))


def loco(cases: list[Case]) -> None:
    """Score every case by models fitted without its conversation's data."""
    for fold in sorted({c.fold for c in cases}):
        train = [c for c in cases if fold not in c.groups]
        fitted = fit_all(train, fold)
        test = [c for c in cases if c.fold == fold]
        feats = score(test, fitted.ranker, fitted.product_weights, fitted.intent,
                      fitted.intent_intercept)  # fmt: skip
        for c, g in zip(test, feats, strict=True):
            c.gate = float(fitted.gate.logits(g[None, :])[0])
            c.intent = float(c.vector @ fitted.intent + fitted.intent_intercept)
        print(f"fold {fold}: {len(train)} training cases, {len(test)} scored", flush=True)


def returned(case: Case, offsets: tuple[float, float], threshold: float) -> list[str]:
    """What the store returns for the case at `threshold` (limit 3), given the gate's and the
    intent's offsets."""
    if not case.ids:
        return []
    order = sorted(range(len(case.ids)), key=lambda i: (-case.logits[i], case.ids[i]))
    best = case.logits[order[0]]
    gate = min(case.gate + offsets[0], case.intent + offsets[1])
    out = []
    for i in order[:LIMIT]:
        z = gate + SLOPE * (case.logits[i] - best)
        if 1 / (1 + math.exp(-z)) < threshold:
            break
        out.append(case.ids[i])
    return out


def _quantile_offset(values: Sequence[float], keep: float) -> float:
    """The smallest offset that puts `keep` of `values` at or above 0."""
    ordered = sorted(values)
    return -ordered[math.floor((1 - keep) * len(ordered))] + 1e-9


def choose_offsets(cases: Sequence[Case], keep: float) -> tuple[float, float]:
    """The intent's offset: the smallest that passes `INTENT_KEEP` of the held-out own
    questions; then the gate's: the smallest that keeps `keep` of the held-out own cases whose
    evidence the ranker puts in its top 3, the intent's cap included."""
    own = [c for c in cases if c.kind == "own" and c.regime in ("full", "small", "new")]
    intent = _quantile_offset([c.intent for c in own], INTENT_KEEP)
    answerable = [c for c in own if answered_in_top(c)]
    # among those the intent lets through, the gate must pass enough to keep `keep` of all
    rest = sorted((c.gate for c in answerable if c.intent + intent >= 0), reverse=True)
    needed = min(len(rest), math.ceil(keep * len(answerable)))
    return -rest[needed - 1] + 1e-9, intent


def hit_rate(found: Sequence[Sequence[str]], cases: Sequence[Case]) -> float:
    """The share (%) of cases whose evidence is among what was found for them."""
    return 100 * float(
        np.mean([bool(set(f) & c.evidence) for f, c in zip(found, cases, strict=True)])
    )


def measures(
    cases: Sequence[Case], offset: tuple[float, float], threshold: float = 0.5
) -> list[list[str]]:
    """Per (regime, kind): any@k, reach, silence and memories returned."""
    rows = []
    for regime in ("full", "small", "repeated", "new"):
        for kind in ("own", "other", "chat"):
            sel = [c for c in cases if c.regime == regime and c.kind == kind]
            if not sel:
                continue
            got = [returned(c, offset, threshold) for c in sel]
            silent = 100 * np.mean([not g for g in got])
            mean = np.mean([len(g) for g in got])
            if kind == "own":
                ranked = [[c.ids[i] for i in np.argsort(-c.logits, kind="stable")] for c in sel]
                anyk = [hit_rate([r[:k] for r in ranked], sel) for k in (1, 3, 5)]
                reach = hit_rate(got, sel)
                rows.append([regime, kind, str(len(sel)), *(f"{a:.1f}" for a in anyk),
                             f"{reach:.1f}", f"{silent:.1f}", f"{mean:.2f}"])  # fmt: skip
            else:
                rows.append([regime, kind, str(len(sel)), "-", "-", "-", "-", f"{silent:.1f}",
                             f"{mean:.2f}"])  # fmt: skip
    return rows


def sweep(cases: Sequence[Case], offset: tuple[float, float]) -> list[list[str]]:
    """Reach and silence per threshold (LOCO)."""
    out = []
    for t in THRESHOLDS:
        row = [f"{t:.1f}"]
        for regime, kind in (("full", "own"), ("small", "own"), ("new", "own"),
                             ("full", "other"), ("full", "chat")):  # fmt: skip
            sel = [c for c in cases if c.regime == regime and c.kind == kind]
            got = [returned(c, offset, t) for c in sel]
            if kind == "own":
                row.append(f"{hit_rate(got, sel):.1f}")
            else:
                row.append(f"{100 * np.mean([not g for g in got]):.1f}")
        out.append(row)
    return out


async def main() -> None:
    """Build or load the cases, report leave-one-conversation-out, fit and write."""
    options = parser(__doc__, data=True)
    options.add_argument("--keep", type=float, default=0.98,
                         help="share of answerable questions the gate keeps (LOCO)")  # fmt: skip
    options.add_argument("--cache", type=Path, default=ROOT / ".recall" / "second-stage-cases.pkl",
                         help="cases built once (delete it to rebuild)")  # fmt: skip
    args = options.parse_args()
    training = json.loads(TRAINING.read_text("utf-8"))
    if args.cache.exists():
        cases, extra, embeddings = pickle.loads(args.cache.read_bytes())  # noqa: S301  # our own file
        INTENT_EXTRA.extend(extra)
        EMBEDDINGS.update(embeddings)
    else:
        corpus = load(args.data)
        url = await fresh_database("recall_bench_fit")
        settings = Settings(database_url=url, embedding_cache_ttl=0, embedding_model=BGE_MODEL_NAME)
        # candidates only: what is being fitted is not used
        async with MemoryStore.connect(settings, second_stage=False) as store:
            cases = await build(store, corpus, training)
        args.cache.parent.mkdir(parents=True, exist_ok=True)
        args.cache.write_bytes(pickle.dumps((cases, INTENT_EXTRA, EMBEDDINGS)))
    bge = BgeSmallEmbeddings()
    PERSONAL.extend(
        (np.asarray(bge.embed_query(q)), i % 5)
        for i, q in enumerate(training["personal_questions"])
    )
    loco(cases)
    offset = choose_offsets(cases, args.keep)
    head = ["regime, asked", "n", "any@1", "any@3", "any@5", "reach %", "nothing returned %",
            "returned (mean)"]  # fmt: skip
    held = table(head, [[f"{r[0]} {r[1]}", *r[2:]] for r in measures(cases, offset)])
    sweep_table = table(["threshold", "full reach %", "small reach %", "new-user reach %",
                         "other conversations: silent %", "small talk: silent %"],
                        sweep(cases, offset))  # fmt: skip
    print(held, "\n", sweep_table, sep="")
    final = fit_all(cases, None)
    command = "python benchmarks/fit_second_stage.py"
    if args.keep != 0.98:
        command += f" --keep {args.keep}"
    stage = SecondStage(
        embedding_model=BGE_MODEL_NAME, candidates=CANDIDATES, ranker=final.ranker,
        product_weights=final.product_weights, intent=final.intent,
        intent_intercept=final.intent_intercept, gate=final.gate, gate_offset=offset[0],
        intent_offset=offset[1],
        slope=SLOPE,
        source={"command": command,
                "commit": git_revision(), "data": "LoCoMo dev (../shared/data/locomo_dev.json) "
                "and benchmarks/data/gate_training.json", "fitted": f"{datetime.now():%Y-%m-%d}"},
    )  # fmt: skip
    if not args.no_write:
        OUT.mkdir(parents=True, exist_ok=True)
        (OUT / f"{BGE_MODEL_NAME}.json").write_text(json.dumps(stage.to_json()) + "\n", "utf-8")
    body = f"""## The second stage, leave-one-conversation-out

`{stage.source["command"]}` on {machine()}, commit {git_revision()}, {datetime.now():%Y-%m-%d}.
Every figure is for a conversation scored by models fitted without its data (its memories, its
questions, its renamed questions, and the small-talk lines and training new users of its fold);
the store's own candidates ({CANDIDATES} by cosine and {CANDIDATES} by BM25); limit 3,
threshold 0.5. The intent's offset ({offset[1]:.3f}) passes {INTENT_KEEP:.1%} of the held-out
questions; the gate's ({offset[0]:.3f}) then keeps {args.keep:.0%} of those whose evidence is in
the top 3. "own": questions the user's memories answer; "other": another
conversation's questions, its speakers renamed as this one's; "chat": small talk and generic
requests (benchmarks/data/gate_training.json, not the held-out list).

{held}

Reach and silence per threshold (same cases):

{sweep_table}
"""
    publish("second-stage", body, write=not args.no_write)


if __name__ == "__main__":
    run(main)
