"""Fit the learned second stage and its gate (issues 29 and 35, decisions 0024 and 0027) on the
LoCoMo dev split and LongMemEval_S's dev questions, report every figure on data the models were
fitted without, and write the weights the package ships.

    python benchmarks/fit_second_stage.py [--keep 0.98] [--cache PATH] [--no-write]

The data are read from ../shared/data (locomo_dev.json, longmemeval_s_dev.json.gz) and
benchmarks/data/gate_training.json; a clean checkout reproduces the shipped file with this one
command (LongMemEval's turns are embedded once into .recall/longmemeval-vectors.npz, about an
hour on 2 cores; the cases are kept in --cache).

What it fits (src/recall/search/second_stage.py): the ranker (gradient-boosted trees over the
candidates' features, LightGBM's binary objective, or with --objective lambdarank each case a
query: benchmarks/harness/boosting.py),
the intent model (logistic regression over the query's vector: questions about a user's life
against small talk and generic requests) and the gate (a logistic regression over the query's
features, trained on the ranker's scores for cases it was fitted without), all on the
candidates the store itself brings (`MemoryStore.candidates`), so what is fitted is what is
served. The cases, each a
message asked of one user:
- own: LoCoMo's questions asked of their conversation (full regime), of a small user (its
  evidence sessions and two others), and of a conversation holding every question's echo
  (repeated; evaluated only); and the new users' questions of benchmarks/data/gate_training.json
  (facts told in one thread, asked in other words);
- other: the other conversations' questions with their speakers renamed as this
  conversation's (benchmarks/harness/silence.py), one per small user, and the other new users';
- chat: the small talk and generic requests of gate_training.json;
- LongMemEval (regime "lme"): each question asked of its own haystack (own), and of another
  record's haystack, where it was never said (other); a hit is a memory from an answer session.
  With --never-said-extra N, N more records' questions per haystack (regime "lme_x", up to
  four) are fitted on, never reported; the shipped fit uses none (decision 0028).
  An "other" case whose evidence the haystack holds after all (the same session, or a turn
  within 0.9 cosine of an evidence turn: `harness.longmemeval.near_copy`) is reported both
  with and without it.
- RealMem (regime "realmem", issue 54): the eight users of ../shared/data/realmem replayed
  session by session as benchmarks/realmem.py replays them, each query turn asked with the
  earlier sessions stored; a hit is a memory of a session its answer used. User and assistant
  turns, the shape of the library's users; each user is a group of their own.
- the fact users of the `fit` split (benchmarks/data/fact_users.json; regime "new", issue 54):
  each asks about its 30 facts in other words (own), about what it never said (other) and
  makes small talk (chat). The measure and fresh users are never read here.
Held-out files (small_talk.json, paraphrase_probe.json) are never read here.

Grouped cross-validation: the groups are LoCoMo's five conversations, five folds of
LongMemEval's questions (each has its own haystack) and RealMem's eight users. For each group,
every model is fitted without any case that carries its data (its questions, its memories, its
renamed questions, the small-talk lines and new users assigned to it) and scores its cases; a
case's scores are kept only from the fit that did not see it. Cross-data figures fit on one data
set (and gate_training.json) and score the other. Every headline figure has a bootstrap 95%
interval over the groups it is averaged over (conversations; LongMemEval questions; users). The
gate's offset is its operating point: the smallest that keeps `--keep` of the held-out own
questions whose evidence the ranker puts in the top 3. No regret (issue 54): per data family,
and for RealMem per user size when asked, reach and first at the defaults beside plain cosine's
top 3 over the same candidates, paired, held out. The shipped weights are then fitted on every
case. Writes src/recall/search/models/second_stage/<model>.json and docs/benchmarks.md (section
"second-stage").
"""

from __future__ import annotations

import json
import math
import pickle
import random
import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
from harness import boosting, realmem
from harness import longmemeval as lme
from harness.bootstrap import shown
from harness.corpus import Corpus, load
from harness.db import fresh_database, settle
from harness.factusers import fact_users
from harness.regimes import REGIMES, Regime, embed, targets, turn_items
from harness.report import ROOT, git_revision, machine, publish, table
from harness.run import parser, run
from harness.silence import rename, renamings
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

from recall.config import Settings
from recall.embeddings.bge import BGE_MODEL_NAME, BgeSmallEmbeddings
from recall.search.asking import AskingModel
from recall.search.features import RANK_FEATURES, query_facts, rank_features
from recall.search.fusion import default_fusion
from recall.search.gate_features import GATE_FEATURES, gate_features
from recall.search.rankers import model_text
from recall.search.second_stage import KIND, LinearModel, Model, SecondStage
from recall.search.trees import TreeModel
from recall.search.when import time_bonus, time_window
from recall.store import MemoryStore

TRAINING = ROOT / "benchmarks" / "data" / "gate_training.json"
OUT = ROOT / "src" / "recall" / "search" / "models" / "second_stage"
CANDIDATES = 25  # per side: cosine and BM25 (the research found 15 to 40 level)
LME_FOLDS = 5  # LongMemEval's questions in five groups (each question has its own haystack)
# Other records' questions asked of each LongMemEval user for the gate to learn from, beside
# the one that is reported, kept in the cases (--never-said-extra picks how many are fitted
# on). With four more, its "never said" silence was 33% held out against 19-21%, but a new
# user's plain questions got nothing back (restatement probe's control 26 -> 23 of 30), so the
# shipped fit uses none (decision 0028)
LME_EXTRA_OTHERS = 4
NEVER_SAID_EXTRA = 0
NEW_WEIGHT = 10.0  # in the ranker, a new user's case weighs as much as ten LoCoMo ones: few
# the fit split's fact users are 120 questions where gate_training.json's new users are 30:
# each weighs two LoCoMo ones, so that together they do not crowd LoCoMo's out (decision 0050)
FACT_WEIGHT = 2.0
NEW_GATE_WEIGHT = 5.0  # in the gate, five: more and it learns new users' small talk over others
CHAT_WEIGHT = 3.0  # small-talk lines are fewer than questions, and silence on them is firm
INTENT_KEEP = 0.998  # share of the held-out questions the intent lets through
# How fast a candidate's score falls below the best one's, per unit of ranker logit: the
# steepest of SLOPES that costs the held-out reach at the defaults at most SLOPE_COST points
# (a rule fixed before its figures were seen, issue 35): the memories that answer nothing stay
# out of an open gate, the evidence at ranks 2 and 3 stays in.
SLOPES = (0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0)
SLOPE_COST = 0.5
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
    groups: frozenset[int]  # the groups (folds) whose data it carries
    weight: float = 1.0
    source: str = "locomo"  # the data set its memories come from: locomo, lme, new
    asked: datetime | None = None  # when it is asked: the "now" of a time it names
    dates: list[datetime] = field(default_factory=list)  # its candidates' created_at
    ids: list[str] = field(default_factory=list)
    x: np.ndarray = field(default_factory=lambda: np.zeros((0, len(RANK_FEATURES))))
    cosines: list[float] = field(default_factory=list)
    facts: Any = None
    labels: np.ndarray = field(default_factory=lambda: np.zeros(0))
    texts: list[tuple[str, str]] = field(default_factory=list)  # its candidates' two sides
    near_copy: bool = False  # another record's question whose evidence this user holds
    size: int = 0  # the user's memories when asked (RealMem's strata)
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
    last: dict[str, datetime] = {}
    for turn in corpus.turns:
        if turn["created_at"] is not None:
            last[turn["user_id"]] = max(last.get(turn["user_id"], turn["created_at"]),
                                        turn["created_at"])  # fmt: skip
    for case in cases:
        if case.regime == "new":
            case.source = "new"
        else:  # asked a day after the conversation's last session, as the echoes were
            conv = case.user.split("-small-")[0].removesuffix("-repeated")
            if conv in last:
                case.asked = (last[conv] + timedelta(days=1)).replace(tzinfo=UTC)
    await candidates(store, cases)
    INTENT_EXTRA.extend(
        (np.asarray(v), fold[q[0]]) for v, q in zip(fp_vectors, corpus.questions, strict=True)
    )
    return cases


TEXTS: dict[str, tuple[str, str]] = {}  # each memory's text, once (the pickles share them)
INTENT_EXTRA: list[tuple[np.ndarray, int]] = []  # first-person question vectors, by fold
PERSONAL: list[tuple[np.ndarray, int]] = []  # the training file's personal questions, by fold


async def candidates(store: MemoryStore, cases: Sequence[Case]) -> None:
    """Each case's candidates through the store, and their features and labels."""
    for n, case in enumerate(cases):
        rows, near = await store.candidates(case.user, case.text, case.vector, CANDIDATES)
        case.ids = [str(r.id) for r in rows]
        case.facts = query_facts(case.text, rows)
        case.x = rank_features(case.facts, rows, near, CANDIDATES)
        case.cosines = [1.0 - float(rows[i].distance) for i in near]
        case.labels = np.array([int(i in case.evidence) for i in case.ids])
        case.dates = [r.created_at for r in rows]
        case.texts = [TEXTS.setdefault(str(r.id), (r.user_message, r.ai_response)) for r in rows]
        if n % 1000 == 0:
            print(f"candidates: {n} of {len(cases)} cases", flush=True)


async def build_lme(
    store: MemoryStore, records: list[lme.Record], chat: Sequence[str]
) -> list[Case]:
    """LongMemEval's users (one per question), each asked its own question, another record's
    question (never said to this user; seeded) and one small-talk line."""
    table = await lme.vectors(store.embedder, records)
    evidence: list[frozenset[str]] = []
    for record in records:
        ids = await store.add_turns(lme.items(record, table), batch_size=5000)
        evidence.append(frozenset(
            i for i, t in zip(ids, record.turns, strict=True)
            if t["metadata"]["session"] in record.answer_sessions
        ))  # fmt: skip
    await settle(store.settings.database_url or "")
    vectors = [np.asarray(await store.embedder.embed_query(r.question)) for r in records]
    chat_vectors = [np.asarray(await store.embedder.embed_query(t)) for t in chat]
    group = [len(REGIME_FOLDS) + i % LME_FOLDS for i in range(len(records))]
    rng = random.Random(35)
    cases: list[Case] = []
    for i, record in enumerate(records):
        cases.append(Case("lme", "own", record.user, record.question, vectors[i], evidence[i],
                          frozenset({group[i]}), source="lme", asked=record.asked))  # fmt: skip
        o = rng.choice([j for j in range(len(records)) if group[j] != group[i]])
        cases.append(Case("lme", "other", record.user, records[o].question, vectors[o],
                          frozenset(), frozenset({group[i], group[o]}), source="lme",
                          asked=records[o].asked))  # fmt: skip
        j = rng.randrange(len(chat))
        cases.append(Case("lme", "chat", record.user, chat[j], chat_vectors[j], frozenset(),
                          frozenset({group[i]}), CHAT_WEIGHT, source="lme"))  # fmt: skip
    # more records' questions asked of each user, for the gate to learn from (regime "lme_x":
    # fitted on, never reported, so the "other" figures stay those of the one seeded above)
    extra = random.Random(3535)
    for i, record in enumerate(records):
        for o in extra.sample([j for j in range(len(records)) if group[j] != group[i]],
                              LME_EXTRA_OTHERS):  # fmt: skip
            cases.append(Case("lme_x", "other", record.user, records[o].question, vectors[o],
                              frozenset(), frozenset({group[i], group[o]}), source="lme",
                              asked=records[o].asked))  # fmt: skip
    await candidates(store, cases)
    return cases


REGIME_FOLDS = range(5)  # LoCoMo's five conversations
REALMEM_GROUPS = 10  # RealMem's users are groups 10 to 17, one a user (after LongMemEval's)
FACT_FOLDS = len(REGIME_FOLDS)  # the fit split's fact users join the LoCoMo folds, as new users


async def build_realmem(store: MemoryStore) -> list[Case]:
    """RealMem's eight users replayed as `benchmarks/realmem.py` replays them (each session's
    query turns asked at its time with the earlier sessions stored, then its pairs stored):
    each query turn a case whose evidence is the memories of the sessions its answer used, and
    each user their own group (user and assistant turns: the shape of the library's users)."""
    users = realmem.load()
    asked = [m.text for u in users for s in u.sessions for m in s.queries]
    table = await realmem.vectors(store.embedder, users, asked)
    cases: list[Case] = []
    for n, user in enumerate(users):
        by_session: dict[str, list[str]] = {}
        for session in user.sessions:
            stored = sum(map(len, by_session.values()))
            for message in session.queries:
                evidence = frozenset(i for s in message.used for i in by_session.get(s, []))
                cases.append(Case("realmem", "own", user.user_id, message.text,
                                  realmem.query_vector(message.text, table), evidence,
                                  frozenset({REALMEM_GROUPS + n}), source="realmem",
                                  asked=session.at, size=stored))  # fmt: skip
            await candidates(store, cases[len(cases) - len(session.queries) :])
            ids = await store.add_turns(realmem.items(user, session, table), writers=1)
            by_session[session.uuid] = list(ids)
    return cases


async def build_fact_users(store: MemoryStore) -> list[Case]:
    """The fact users of the `fit` split (benchmarks/harness/factusers.py; the measure and
    fresh users are never read here): each tells 30 facts among small talk in one thread, then
    asks about each in other words (own), asks about what they never said (other) and makes
    small talk (chat); new users, weighed as gate_training.json's are."""
    start = datetime(2026, 1, 1, 9, tzinfo=UTC)
    cases: list[Case] = []
    for i, user in enumerate(fact_users(split="fit")):
        uid = f"fact-{user.name.lower()}"
        ids = await store.add_turns(
            {"user_id": uid, "user_message": t.user, "ai_response": t.assistant,
             "conversation_id": f"{uid}-told", "created_at": start + timedelta(minutes=k)}
            for k, t in enumerate(user.thread)
        )  # fmt: skip
        told = {t.fact: ids[k] for k, t in enumerate(user.thread) if t.fact is not None}
        group = frozenset({i % FACT_FOLDS})
        asks = [("own", q.text, frozenset({told[q.fact]})) for q in user.questions]
        asks += [("other", q, frozenset()) for q in user.never_said]
        asks += [("chat", q, frozenset()) for q in user.small_talk]
        for kind, text, evidence in asks:
            vector = np.asarray(await store.embedder.embed_query(text))
            cases.append(Case("new", kind, uid, text, vector, evidence, group, FACT_WEIGHT,
                              source="new"))  # fmt: skip
    await candidates(store, cases)
    return cases


@dataclass
class Fitted:
    """The three models of one fit."""

    ranker: TreeModel
    intent: np.ndarray
    intent_intercept: float
    gate: Model


def _linear(names: Sequence[str], x: np.ndarray, y: np.ndarray, w: np.ndarray) -> LinearModel:
    """A logistic regression on standardised `x` as a `LinearModel` over `names`."""
    scaler = StandardScaler().fit(x)
    model = LogisticRegression(C=1.0, max_iter=3000).fit(scaler.transform(x), y, sample_weight=w)
    return LinearModel(tuple(names), scaler.mean_.copy(), scaler.scale_.copy(),
                       model.coef_[0].copy(), float(model.intercept_[0]))  # fmt: skip


def _own(cases: Iterable[Case]) -> list[Case]:
    """The cases a ranker learns from: questions whose memories answer them."""
    return [c for c in cases if c.kind == "own" and c.regime != "repeated" and c.ids]


OBJECTIVES = ("lambdarank", "binary")
# the ranker's objective in use, set once from --objective: binary ships, as LambdaRank's
# closer scores closed the gate on a new user's plain questions (decision 0028)
OBJECTIVE = ["binary"]


def fit_ranker(cases: Sequence[Case]) -> TreeModel:
    """The ranker's trees over the own cases' candidates. LambdaRank: each case a query, only
    those that hold evidence (a query without any teaches a ranking objective nothing);
    binary: every candidate of every own case scored alone, relevant or not."""
    ranking = OBJECTIVE[0] == "lambdarank"
    own = [c for c in _own(cases) if c.labels.any() or not ranking]
    x = np.vstack([c.x for c in own])
    y = np.concatenate([c.labels for c in own])
    w = np.concatenate([[c.weight] * len(c.ids) for c in own])
    groups = [len(c.ids) for c in own] if ranking else None
    return boosting.fit(x, y, w, RANK_FEATURES, groups=groups)


def fit_intent(cases: Sequence[Case], excluded: frozenset[int]) -> tuple[np.ndarray, float]:
    """Questions about a user's life (own full, new and LongMemEval cases, the first-person
    forms and the training file's personal questions) against small talk and generic requests.
    `excluded`: the groups whose extra questions stay out."""
    pos = [c.vector for c in cases if c.kind == "own" and c.regime in ("full", "new", "lme")]
    pos += [v for v, f in INTENT_EXTRA if f not in excluded]
    pos += [v for v, f in PERSONAL if f not in excluded]
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


def bonus_of(c: Case, logits: np.ndarray) -> np.ndarray:
    """What the time the case's message names adds to its candidates' logits, as
    `SecondStage.score` adds it (`recall.search.when`)."""
    window = time_window(c.text, c.asked) if c.asked is not None else None
    return time_bonus(window, c.dates, logits)


def served(c: Case, logits: np.ndarray) -> np.ndarray:
    """The logits the store ranks by: the ranker's, with the time bonus."""
    out: np.ndarray = logits + bonus_of(c, logits)
    return out


def gate_x(c: Case, logits: np.ndarray, intent: np.ndarray, intent_b: float) -> np.ndarray:
    """A case's gate features, given its candidates' ranker logits (before the time bonus)."""
    lg = float(c.vector @ intent + intent_b)
    hit = bool(bonus_of(c, logits).any())
    return gate_features(c.facts, c.x, np.asarray(logits), c.cosines, lg, hit)


def logits_of(ranker: TreeModel, c: Case) -> np.ndarray:
    """The ranker's logit of each of a case's candidates."""
    return ranker.logits(c.x) if c.ids else np.zeros(0)


def answered_in_top(case: Case, k: int = LIMIT, logits: np.ndarray | None = None) -> bool:
    """Whether the ranker (its `logits`, the case's own by default) puts an evidence memory in
    its top k."""
    if not len(case.ids):
        return False
    order = np.argsort(-(case.logits if logits is None else logits), kind="stable")[:k]
    return bool(case.labels[order].any())


def _gate_weight(c: Case) -> float:
    return c.weight * (NEW_GATE_WEIGHT / NEW_WEIGHT if c.regime == "new" else 1.0)


def fit_all(train: Sequence[Case], excluded: frozenset[int]) -> Fitted:
    """The three models on `train`. The gate learns from ranker logits of cases the ranker was
    fitted without (the training groups in `INNER_FOLDS` chunks, each scored by a ranker
    fitted on the others), as it will meet them when serving; its label: an own case whose
    evidence the ranker puts in its top 3. `excluded`: the groups whose extra intent questions
    stay out."""
    groups = sorted({c.fold for c in train})
    unseen: dict[int, np.ndarray] = {}
    for k in range(INNER_FOLDS):
        chunk = frozenset(groups[k::INNER_FOLDS])
        inner = fit_ranker([c for c in train if not c.groups & chunk])
        for c in train:
            if c.fold in chunk:
                unseen[id(c)] = logits_of(inner, c)
    intent, intent_b = fit_intent(train, excluded)
    g_x = np.vstack([gate_x(c, unseen[id(c)], intent, intent_b) for c in train])
    y = np.array([
        int(c.kind == "own" and answered_in_top(c, logits=served(c, unseen[id(c)])))
        for c in train
    ])  # fmt: skip
    w = np.array([_gate_weight(c) for c in train])
    if GATE_KIND[0] == "trees":
        gate: Model = boosting.fit(g_x, y, w, GATE_FEATURES, params=GATE_PARAMS)
    else:
        gate = _linear(GATE_FEATURES, g_x, y, w)
    return Fitted(fit_ranker(train), intent, intent_b, gate)


GATE_PARAMS = {"max_depth": 3, "num_leaves": 7, "min_data_in_leaf": 60}
GATE_KIND = ["linear"]  # the gate's model; "trees" held silence less well (decision 0027)
INNER_FOLDS = 3


def score(cases: Iterable[Case], fitted: Fitted) -> list[tuple[np.ndarray, float, float]]:
    """Each case's ranker logits (with the time it names, as `SecondStage.score` adds it),
    gate logit and intent logit under `fitted`."""
    out = []
    for c in cases:
        logits = logits_of(fitted.ranker, c)
        g = gate_x(c, logits, fitted.intent, fitted.intent_intercept)
        intent = float(c.vector @ fitted.intent + fitted.intent_intercept)
        out.append((served(c, logits), float(fitted.gate.logits(g[None, :])[0]), intent))
    return out


def held_out(cases: list[Case], train_on: Sequence[Case] | None = None) -> None:
    """Score every case of `cases` by models fitted without its group's data (on `train_on`,
    all of `cases` by default). Scores are kept aside until every group is done: a fit scores
    its own training cases too, and those scores must not stand for held-out ones."""
    pool = cases if train_on is None else train_on
    kept: list[tuple[Case, tuple[np.ndarray, float, float]]] = []
    for fold in sorted({c.fold for c in cases}):
        train = [c for c in pool if fold not in c.groups]
        test = [c for c in cases if c.fold == fold]
        kept += zip(test, score(test, fit_all(train, frozenset({fold}))), strict=True)
        print(f"group {fold}: {len(train)} training cases, {len(test)} scored", flush=True)
    for c, (logits, gate, intent) in kept:
        c.logits, c.gate, c.intent = logits, gate, intent


def cross(fit_on: Sequence[Case], scored: list[Case], excluded: frozenset[int]) -> None:
    """Score `scored` by models fitted on `fit_on` (another data set) alone, the extra intent
    questions of the `excluded` groups left out."""
    fitted = fit_all(fit_on, excluded)
    for c, (logits, gate, intent) in zip(scored, score(scored, fitted), strict=True):
        c.logits, c.gate, c.intent = logits, gate, intent


SLOPE = [0.1]  # the slope in use: chosen by `choose_slope` before the figures are made
# a turn's gate weighs the match with the intent (decision 0039): the intent's weight and the
# bias, chosen by `python benchmarks/gate_rule.py` on its fit part for the offsets in use
GATE_RULE = (1.0, -3.0)


def returned(case: Case, offsets: tuple[float, float], threshold: float) -> list[str]:
    """What the store returns for the case at `threshold` (limit 3), given the gate's and the
    intent's offsets and the slope in use."""
    if not case.ids:
        return []
    order = sorted(range(len(case.ids)), key=lambda i: (-case.logits[i], case.ids[i]))
    best = case.logits[order[0]]
    weight, bias = GATE_RULE
    asks = _asking().logit(case.text, case.vector)  # the verdict's intent (decision 0039)
    gate = (case.gate + offsets[0] + weight * asks - bias) / (1 + weight)
    out = []
    for i in order[:LIMIT]:
        below = case.logits[i] - best
        if gate >= 0:  # `SecondStage.score_of`: an open gate hands over the best candidates
            score = 0.5 + (1 / (1 + math.exp(-gate)) - 0.5) * math.exp(SLOPE[0] * below)
        else:
            score = 1 / (1 + math.exp(-(gate + SLOPE[0] * below)))
        if score < threshold:
            break
        out.append(case.ids[i])
    return out


@cache
def _asking() -> AskingModel:
    """The shipped asking model (`benchmarks/fit_intent.py` fits it, not this script): the
    intent a turn's gate weighs with the match, read alone: the shipped ranker may be over
    other features than the one being fitted."""
    text = model_text(KIND, BGE_MODEL_NAME)
    if text is None:
        raise SystemExit(f"no shipped second stage for {BGE_MODEL_NAME}")
    data = json.loads(text)
    return AskingModel.from_json(data["asking"], int(data["dimensions"]))


def _quantile_offset(values: Sequence[float], keep: float) -> float:
    """The smallest offset that puts `keep` of `values` at or above 0."""
    ordered = sorted(values)
    return -ordered[math.floor((1 - keep) * len(ordered))] + 1e-9


def choose_offsets(cases: Sequence[Case], keep: float) -> tuple[float, float]:
    """The intent's offset: the smallest that passes `INTENT_KEEP` of the held-out own
    questions; then the gate's: the smallest that keeps `keep` of the held-out own cases whose
    evidence the ranker puts in its top 3, the intent's cap included. Chosen on the families
    fitted with small talk beside their questions (`OFFSET_REGIMES`)."""
    own = [c for c in cases if c.kind == "own" and c.regime in OFFSET_REGIMES]
    intent = _quantile_offset([c.intent for c in own], INTENT_KEEP)
    answerable = [c for c in own if answered_in_top(c)]
    # among those the intent lets through, the gate must pass enough to keep `keep` of all
    rest = sorted((c.gate for c in answerable if c.intent + intent >= 0), reverse=True)
    needed = min(len(rest), math.ceil(keep * len(answerable)))
    return -rest[needed - 1] + 1e-9, intent


def choose_slope(cases: Sequence[Case], offset: tuple[float, float]) -> float:
    """The steepest of `SLOPES` whose reach at the defaults, over the held-out own questions,
    is within `SLOPE_COST` points of the gentlest's; set for `returned`."""
    own = [c for c in cases if c.kind == "own" and c.regime in OWN_REGIMES]

    def reach(slope: float) -> float:
        SLOPE[0] = slope
        return hit_rate([returned(c, offset, 0.5) for c in own], own)

    first = reach(SLOPES[0])
    chosen = max(s for s in SLOPES if reach(s) >= first - SLOPE_COST)
    SLOPE[0] = chosen
    return chosen


OWN_REGIMES = ("full", "small", "new", "lme", "realmem")  # the questions the slope weighs
# The gate's operating point is chosen on the families fitted with small talk beside their
# questions. RealMem has none: held out, its questions among them moved the offset from 2.49 to
# 2.68, small talk silent 96.3 -> 95.2% for the new users and 96.4 -> 94.9% for LongMemEval's,
# and reach nowhere (issue 54, decision 0050).
OFFSET_REGIMES = ("full", "small", "new", "lme")
_COS = RANK_FEATURES.index("cos")
STRATA = (("under 50", 0, 50), ("50-500", 50, 501), ("over 500", 501, 10**9))


def cosine_top(case: Case, k: int = LIMIT) -> list[str]:
    """Plain cosine's top `k` among the case's candidates (they hold its 25 nearest)."""
    if not case.ids:
        return []
    return [case.ids[i] for i in np.argsort(-case.x[:, _COS], kind="stable")[:k]]


def against_cosine(cases: Sequence[Case], offset: tuple[float, float]) -> list[list[str]]:
    """No regret (issue 54): reach and first at the defaults beside plain cosine's top 3 over
    the same vectors, with the paired difference, per data family (bootstrap over its groups:
    conversations, questions, users), RealMem also by the user's size when asked."""
    rows = []
    families = (("full", "LoCoMo full"), ("small", "LoCoMo small"), ("lme", "LongMemEval"),
                ("realmem", "RealMem"), ("new", "new users"))  # fmt: skip
    for regime, name in families:
        own = [c for c in cases if c.regime == regime and c.kind == "own"]
        strata = STRATA if regime == "realmem" else ()
        for label, low, high in (*strata, ("all", 0, 10**9)):
            sel = [c for c in own if low <= c.size < high]
            if not sel:
                continue
            groups = [c.user.split("-small-")[0] for c in sel]
            got = [returned(c, offset, 0.5) for c in sel]
            cos = [cosine_top(c) for c in sel]
            for what, depth in (("reach", LIMIT), ("first", 1)):
                mine = [
                    float(bool(set(f[:depth]) & c.evidence)) for f, c in zip(got, sel, strict=True)
                ]
                base = [
                    float(bool(set(f[:depth]) & c.evidence)) for f, c in zip(cos, sel, strict=True)
                ]
                diff = [a - b for a, b in zip(mine, base, strict=True)]
                rows.append([f"{name} {label}", what, str(len(sel)), shown(mine, groups),
                             shown(base, groups), shown(diff, groups)])  # fmt: skip
    return rows


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
    for regime in ("full", "small", "repeated", "new", "lme", "realmem"):
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


def headline(cases: Sequence[Case], offset: tuple[float, float]) -> list[list[str]]:
    """The issue's figures with bootstrap intervals: LoCoMo's over conversations, LongMemEval's
    over questions (each its own group)."""

    def group(c: Case) -> str:
        return c.user.split("-small-")[0] if c.source == "locomo" else c.user

    rows = []
    names = (
        ("full", "LoCoMo full"),
        ("small", "LoCoMo small"),
        ("lme", "LongMemEval"),
        ("realmem", "RealMem"),
        ("new", "new users"),
    )
    for regime, name in names:
        own = [c for c in cases if c.regime == regime and c.kind == "own"]
        if not own:
            continue
        top5 = [float(c.labels[np.argsort(-c.logits, kind="stable")[:5]].any()) for c in own]
        reach = [float(bool(set(returned(c, offset, 0.5)) & c.evidence)) for c in own]
        groups = [group(c) for c in own]
        rows.append([name, "any@5", str(len(own)), shown(top5, groups)])
        rows.append([name, "reach at the defaults", str(len(own)), shown(reach, groups)])
        for kind in ("other", "chat"):
            sel = [c for c in cases if c.regime == regime and c.kind == kind]
            if sel:
                silent = [float(not returned(c, offset, 0.5)) for c in sel]
                rows.append([name, f"{kind}: silent", str(len(sel)),
                             shown(silent, [group(c) for c in sel])])  # fmt: skip
            never = [c for c in sel if not c.near_copy]
            if kind == "other" and len(never) < len(sel):
                silent = [float(not returned(c, offset, 0.5)) for c in never]
                rows.append([name, f"{kind}, near copies left out: silent", str(len(never)),
                             shown(silent, [group(c) for c in never])])  # fmt: skip
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


def mark_near_copies(cases: Sequence[Case]) -> None:
    """Mark LongMemEval's "never said" cases whose evidence the user holds after all
    (`lme.near_copy`): the headline reports their silence with and without them."""
    records = lme.load()
    table = lme.saved_vectors()
    by_user = {r.user: r for r in records}
    by_question = {r.question: r for r in records}
    for c in cases:
        c.near_copy = (
            c.regime == "lme"
            and c.kind == "other"
            and lme.near_copy(by_question[c.text], by_user[c.user], table)
        )


def fewer_extra(cases: Sequence[Case], keep: int) -> list[Case]:
    """`cases` with only the first `keep` of each LongMemEval user's extra "never said"
    questions (regime "lme_x"; the cache holds `LME_EXTRA_OTHERS`, a seeded sample, so its
    first `keep` are a seeded sample of `keep`)."""
    seen: dict[str, int] = dict.fromkeys((c.user for c in cases if c.regime == "lme"), 0)
    out = []
    for c in cases:
        if c.regime == "lme_x":
            seen[c.user] += 1
            if seen[c.user] > keep:
                continue
        out.append(c)
    held = min(seen.values(), default=0)
    if held < keep:  # a cache built before its cases had them: say so, never fit on fewer
        raise SystemExit(
            f"the cached cases hold {held} extra never-said questions per LongMemEval user, "
            f"fewer than --never-said-extra {keep}: delete --cache to rebuild them"
        )
    return out


async def cached(
    folder: Path, name: str, make: Callable[[MemoryStore], Awaitable[list[Case]]]
) -> list[Case]:
    """The cases `make` builds on a fresh database, kept in `folder` for the next run (with the
    intent's extra questions they add)."""
    path = folder / f"{name}.pkl"
    if path.exists():
        cases, extra = pickle.loads(path.read_bytes())  # noqa: S301  # our own file
        INTENT_EXTRA.extend(extra)
        return list(cases)
    before = len(INTENT_EXTRA)
    url = await fresh_database(f"recall_bench_fit_{name}")
    settings = Settings(database_url=url, embedding_cache_ttl=0, embedding_model=BGE_MODEL_NAME)
    # candidates only: what is being fitted is not used
    async with MemoryStore.connect(settings, ranker=default_fusion()) as store:
        cases = await make(store)
    folder.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240  # once, after the build
    path.write_bytes(pickle.dumps((cases, INTENT_EXTRA[before:])))
    return cases


async def main() -> None:
    """Build or load the cases, report held-out and cross-data figures, fit and write."""
    options = parser(__doc__, data=True)
    options.add_argument("--keep", type=float, default=0.98,
                         help="share of answerable questions the gate keeps")  # fmt: skip
    options.add_argument("--cache", type=Path, default=ROOT / ".recall" / "second-stage-cases",
                         help="folder of the cases built once (delete to rebuild)")  # fmt: skip
    options.add_argument("--objective", choices=OBJECTIVES, default=OBJECTIVE[0],
                         help="the ranker's objective")  # fmt: skip
    options.add_argument("--never-said-extra", type=int, default=NEVER_SAID_EXTRA,
                         choices=range(LME_EXTRA_OTHERS + 1), metavar=f"0..{LME_EXTRA_OTHERS}",
                         help="other records' questions per LongMemEval haystack the gate "
                         "is fitted on beside the reported one (regime lme_x)")  # fmt: skip
    args = options.parse_args()
    OBJECTIVE[0] = args.objective
    revision = git_revision()  # the code that runs, whatever is edited during the run
    training = json.loads(TRAINING.read_text("utf-8"))
    cases = await cached(
        args.cache, "locomo", lambda store: build(store, load(args.data), training)
    )
    cases += await cached(
        args.cache, "lme", lambda store: build_lme(store, lme.load(), training["small_talk"])
    )
    cases += await cached(args.cache, "realmem", build_realmem)
    cases += await cached(args.cache, "factusers", build_fact_users)
    cases = fewer_extra(cases, args.never_said_extra)
    bge = BgeSmallEmbeddings()
    PERSONAL.extend(
        (np.asarray(bge.embed_query(q)), i % len(REGIME_FOLDS))
        for i, q in enumerate(training["personal_questions"])
    )
    mark_near_copies(cases)
    held_out(cases)
    offset = choose_offsets(cases, args.keep)
    slope = choose_slope(cases, offset)
    head = ["regime, asked", "n", "any@1", "any@3", "any@5", "reach %", "nothing returned %",
            "returned (mean)"]  # fmt: skip
    held = table(head, [[f"{r[0]} {r[1]}", *r[2:]] for r in measures(cases, offset)])
    intervals = table(
        ["data", "measure", "n", "held out % [95% interval]"], headline(cases, offset)
    )
    regret = table(["data, stratum", "measure", "n", "defaults % [95%]", "cosine top-3 % [95%]",
                    "defaults minus cosine [95%]"], against_cosine(cases, offset))  # fmt: skip
    sweep_table = table(["threshold", "full reach %", "small reach %", "new-user reach %",
                         "other conversations: silent %", "small talk: silent %"],
                        sweep(cases, offset))  # fmt: skip
    # across data sets: fitted on one (and the training file), scored on the other
    locomo = frozenset(REGIME_FOLDS)
    scored_lme = [c for c in cases if c.source == "lme"]
    scored_locomo = [c for c in cases if c.source == "locomo"]
    lme_groups = frozenset(range(len(REGIME_FOLDS), len(REGIME_FOLDS) + LME_FOLDS))
    cross([c for c in cases if c.source != "lme"], scored_lme, lme_groups)
    cross([c for c in cases if c.source != "locomo"], scored_locomo, locomo)
    crossed = headline(scored_lme, choose_offsets(scored_lme, args.keep))
    crossed += headline(scored_locomo, choose_offsets(scored_locomo, args.keep))
    crossed_table = table(["scored on", "measure", "n", "fitted on the other % [95% interval]"],
                          crossed)  # fmt: skip
    print(held, intervals, regret, crossed_table, sweep_table, sep="\n")
    final = fit_all(cases, frozenset())
    command = "python benchmarks/fit_second_stage.py"
    if args.keep != 0.98:
        command += f" --keep {args.keep}"
    if args.objective != options.get_default("objective"):
        command += f" --objective {args.objective}"
    if args.never_said_extra != options.get_default("never_said_extra"):
        command += f" --never-said-extra {args.never_said_extra}"
    stage = SecondStage(
        embedding_model=BGE_MODEL_NAME, candidates=CANDIDATES, ranker=final.ranker,
        intent=final.intent,
        intent_intercept=final.intent_intercept, gate=final.gate, gate_offset=offset[0],
        intent_offset=offset[1], intent_weight=GATE_RULE[0], gate_bias=GATE_RULE[1],
        slope=SLOPE[0], asking=_asking(),
        source={"command": command,
                "commit": revision, "data": "LoCoMo dev (../shared/data/locomo_dev.json), "
                "LongMemEval_S dev (../shared/data/longmemeval_s_dev.json.gz), RealMem "
                "(../shared/data/realmem), the fit split of benchmarks/data/fact_users.json "
                "and benchmarks/data/gate_training.json", "fitted": f"{datetime.now():%Y-%m-%d}",
                "asking": "python benchmarks/fit_intent.py"},
    )  # fmt: skip
    if not args.no_write:
        OUT.mkdir(parents=True, exist_ok=True)
        (OUT / f"{BGE_MODEL_NAME}.json").write_text(json.dumps(stage.to_json()) + "\n", "utf-8")
    body = f"""## The second stage, on data it was fitted without

`{stage.source["command"]}` on {machine()}, commit {revision}, {datetime.now():%Y-%m-%d}.
Grouped cross-validation (decision 0027): the groups are LoCoMo's five conversations, five folds
of LongMemEval_S's 195 dev questions (each its own haystack) and RealMem's eight users (issue
54; the fit split's fact users join the LoCoMo folds as new users); every figure is for a case
scored by models fitted without its group's data (its memories, its questions, its renamed
questions, and the small-talk lines and training new users of its group), and a fit's scores of
its own training cases are never kept. The store's own candidates ({CANDIDATES} by cosine and
{CANDIDATES} by BM25); limit 3, threshold 0.5. The intent's offset ({offset[1]:.3f}) passes
{INTENT_KEEP:.1%} of the held-out questions; the gate's ({offset[0]:.3f}) then keeps
{args.keep:.0%} of those whose evidence is in the top 3; the slope ({slope}) is the steepest of
{", ".join(map(str, SLOPES))} that costs the held-out reach at most {SLOPE_COST} points.
"own": questions the user's memories answer; "other": another conversation's questions, its
speakers renamed as this one's (LoCoMo), or another record's question (LongMemEval); "chat":
small talk and generic requests
(benchmarks/data/gate_training.json, not the held-out list). LongMemEval's hits are memories
from an answer session.

{held}

With bootstrap 95% intervals over the groups the figures average over (LoCoMo: its
conversations; LongMemEval: its questions; RealMem and the new users: users):

{intervals}

No regret (issue 54): the defaults beside plain cosine's top 3 over the same vectors, held
out, paired per question, bootstrap 95% intervals over the same groups; RealMem also by the
user's memories when asked:

{regret}

Across data sets: fitted on LoCoMo (and gate_training.json) alone and scored on LongMemEval,
and the reverse; each scored set's offsets chosen by the same rule on its own cases:

{crossed_table}

Reach and silence per threshold (held out):

{sweep_table}
"""
    publish("second-stage", body, write=not args.no_write)


if __name__ == "__main__":
    run(main)
