"""Retrieval quality on LoCoMo (dev split) in three regimes (issue 20): recall@k per mode, what
the defaults return, and query latency per mode on the same data; silence at the defaults on
messages no memory answers, in three more regimes (issue 29); reach and silence per threshold;
`--fit` refits the hybrid fusion model (on the full regime).

    python benchmarks/locomo.py [--fit] [--data ../shared/data/locomo_dev.json]
                                [--candidates 20] [--conversations N] [--model NAME]
                                [--regimes full,small,repeated,silence-other,small-talk,
                                           silence-small]

One memory per consecutive turn pair ("Speaker: text" on both sides, image captions included),
dated by its session. Questions of categories 1-4 are asked; a hit is an evidence turn's
memory in the top k. The regimes (benchmarks/harness/regimes.py): full, each conversation one user;
small, per question a user holding its evidence sessions and two other sessions of the same
conversation; repeated, each conversation plus every question asked once before and answered
"I'm not sure." (its echo). Every text is embedded once; the searches take the precomputed
query vectors. The silence regimes (benchmarks/harness/silence.py) ask the full or the small
regime's users questions of the other conversations, their speakers renamed as the user's, and
the lines of benchmarks/data/small_talk.json (held out: not for tuning); each is asked at the
store's defaults (`store.search(user, text)`: no mode, limit or threshold given). Every regime's
messages are also asked once at the defaults with threshold 0, and the results are cut at
thresholds 0.1 to 0.9 in Python (the threshold compares `Memory.score`): reach and silence per
threshold. Writes docs/benchmarks.md (section "locomo").
"""

from __future__ import annotations

import statistics
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any

import numpy as np
from harness.corpus import CATEGORIES, Corpus, load
from harness.db import fresh_database, settle
from harness.heldout import small_talk
from harness.regimes import LABELS, REGIMES, Regime, Target, Vectors, embed, targets, turn_items
from harness.report import git_revision, machine, publish, table
from harness.run import parser, run
from harness.silence import SILENCES, SWEEP, Silence, Unanswered, passing, silence, sweep_mismatches
from harness.timing import percentiles, timed_interleaved

from recall.config import DEFAULT_EMBEDDING_MODEL, RetrievalMode, Settings
from recall.db.search_rows import keyword_rows, vector_rows
from recall.embeddings import Vector
from recall.memory import Memory
from recall.search.fusion import (
    FEATURES,
    Candidate,
    FusionModel,
    default_fusion,
    features,
    merge_candidates,
)
from recall.search.keywords import keywords_from_text
from recall.store import MemoryStore

KS = (1, 3, 5, 10)
MODES: tuple[RetrievalMode, ...] = ("semantic", "keyword", "hybrid")


@dataclass
class Question:
    """A question asked of one user's memories, its query vector and what it should find."""

    user: str
    text: str
    category: int
    vector: Vector
    target: Target

    @property
    def evidence(self) -> frozenset[str]:
        """The ids of the memories holding its evidence."""
        return self.target.evidence


@dataclass
class Outcome:
    """A regime's run: its questions and each user's number of memories stored (equal turns
    of a user are stored once); then per mode, each question's top 10 (no threshold), its
    results at the defaults and their times in ms."""

    regime: Regime
    questions: list[Question]
    sizes: dict[str, int]
    ranked: dict[str, list[list[str]]] = field(default_factory=dict)
    defaults: dict[str, list[list[Memory]]] = field(default_factory=dict)
    times: dict[str, list[float]] = field(default_factory=dict)
    default: list[list[Memory]] = field(default_factory=list)
    """`store.search(user, text)` per question: no mode, limit or threshold given"""
    sweep: list[list[Memory]] = field(default_factory=list)
    """the same with threshold 0"""


@dataclass
class Quiet:
    """A silence regime's run: its messages with their query vectors, and what the defaults
    return for each (`default`), and the same at threshold 0 (`sweep`)."""

    silence: Silence
    vectors: list[Vector]
    default: list[list[Memory]] = field(default_factory=list)
    sweep: list[list[Memory]] = field(default_factory=list)


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
    return cands, [str(c.key) for c in cands]


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


async def store_regime(
    store: MemoryStore, corpus: Corpus, regime: Regime, vectors: Vectors
) -> Outcome:
    """Store a regime's memories (precomputed vectors); its questions, not asked yet."""
    started = time.perf_counter()
    ids = await store.add_turns(turn_items(corpus, regime, vectors), batch_size=2000)
    load_s = time.perf_counter() - started
    questions = []
    for asked, target in zip(regime.asks, targets(corpus, regime, ids), strict=True):
        _user, text, category, _wanted = corpus.questions[asked.question]
        vector = vectors.queries[asked.question]
        questions.append(Question(asked.user, text, category, vector, target))
    owner = dict(zip(ids, (item.user for item in regime.items), strict=True))  # one per memory
    sizes = Counter(owner.values())
    print(f"{regime.name}: {len(owner)} memories of {len(sizes)} users stored in {load_s:.1f} s")
    return Outcome(regime, questions, dict(sizes))


async def ask(store: MemoryStore, questions: list[Question]) -> dict[str, list[list[str]]]:
    """Each mode's top 10 per question, without a threshold (the modes in turn per question)."""
    ranked: dict[str, list[list[str]]] = {m: [] for m in MODES}
    for q in questions:
        for mode in MODES:
            found = await store.search(
                q.user, q.text, limit=10, similarity_threshold=0.0, mode=mode, query_vector=q.vector
            )
            ranked[mode].append([m.id for m in found])
    return ranked


async def ask_defaults(
    store: MemoryStore, questions: list[Question]
) -> dict[RetrievalMode, tuple[list[float], list[Any]]]:
    """What `store.search(user, text, mode=mode)` returns per question (Settings' limit and
    threshold), the query vector given, timed: the modes take turns in blocks of questions."""
    calls = {
        mode: [partial(store.search, q.user, q.text, mode=mode, query_vector=q.vector)
               for q in questions]
        for mode in MODES
    }  # fmt: skip
    return await timed_interleaved(calls)


async def ask_unset(
    store: MemoryStore, asked: list[tuple[str, str, Vector]]
) -> tuple[list[list[Memory]], list[list[Memory]]]:
    """Per (user, text, vector): what `store.search(user, text)` returns at the store's
    defaults (the vector given, so the text is not embedded again), and at threshold 0."""
    default, sweep = [], []
    for user, text, vector in asked:
        default.append(await store.search(user, text, query_vector=vector))
        sweep.append(await store.search(user, text, similarity_threshold=0.0, query_vector=vector))
    return default, sweep


async def embed_queries(store: MemoryStore, texts: list[str]) -> list[Vector]:
    """Each text embedded as the store embeds a query; equal texts once."""
    unique = {t: await store.embedder.embed_query(t) for t in dict.fromkeys(texts)}
    return [unique[t] for t in texts]


def pct(values: list[bool] | list[int]) -> str:
    """The share of true values, in % with one decimal."""
    return f"{100 * sum(values) / max(len(values), 1):.1f}"


def at_defaults(questions: list[Question], results: list[list[Memory]]) -> list[str]:
    """Evidence reached %, memories returned (mean), % of the returned from sessions without
    evidence, % of the questions whose first result is their own echo, or any echo ("-"
    without echoes)."""
    reached, own, any_echo = [], [], []
    returned = outside = 0
    for q, found in zip(questions, results, strict=True):
        ids = [m.id for m in found]
        reached.append(bool(set(ids) & q.evidence))
        returned += len(ids)
        outside += sum(i in q.target.outside for i in ids)
        own.append(bool(ids) and ids[0] == q.target.echo)
        any_echo.append(bool(ids) and ids[0] in q.target.echoes)
    echoes = any(q.target.echoes for q in questions)
    return [
        pct(reached),
        f"{returned / max(len(results), 1):.2f}",
        f"{100 * outside / max(returned, 1):.1f}",
        pct(own) if echoes else "-",
        pct(any_echo) if echoes else "-",
    ]


def recall_rows(out: Outcome, mode: str) -> tuple[list[str], list[str]]:
    """A mode's any@k and all@k (top 10 without a threshold), and its any@5 per category."""
    hits: dict[str, list[bool]] = defaultdict(list)
    for q, ranked in zip(out.questions, out.ranked[mode], strict=True):
        for k in KS:
            top = set(ranked[:k])
            hits[f"any@{k}"].append(bool(top & q.evidence))
            hits[f"all@{k}"].append(q.evidence <= top)
        hits[f"c{q.category}"].append(bool(set(ranked[:5]) & q.evidence))
    return (
        [pct(hits[f"{which}@{k}"]) for which in ("any", "all") for k in KS],
        [pct(hits[f"c{c}"]) for c in CATEGORIES],
    )


TARGETS = {"silence-other": ">= 50", "small-talk": ">= 95"}  # issue 29, % returning nothing


def nothing(results: list[list[Memory]]) -> str:
    """The share of searches that returned nothing, in %."""
    return pct([not found for found in results])


def mean_returned(results: list[list[Memory]]) -> str:
    """The mean number of memories returned."""
    return f"{sum(map(len, results)) / max(len(results), 1):.2f}"


def sweep_rows(outcomes: list[Outcome], quiets: list[Quiet]) -> list[list[str]]:
    """Per regime, reach (evidence among what returns) and silence (nothing returns) at each
    threshold of `SWEEP`, in %."""
    rows = []
    for out in outcomes:
        cut = {t: [passing(found, t) for found in out.sweep] for t in SWEEP}
        reach = {
            t: pct([bool({m.id for m in found} & q.evidence)
                    for q, found in zip(out.questions, cut[t], strict=True)])
            for t in SWEEP
        }  # fmt: skip
        label = LABELS[out.regime.name]
        rows.append([label, "reach %", *(reach[t] for t in SWEEP)])
        rows.append([label, "nothing returned %", *(nothing(cut[t]) for t in SWEEP)])
    for quiet in quiets:
        cut = {t: [passing(found, t) for found in quiet.sweep] for t in SWEEP}
        name = quiet.silence.name
        rows.append([name, "nothing returned %", *(nothing(cut[t]) for t in SWEEP)])
        rows.append([name, "returned (mean)", *(mean_returned(cut[t]) for t in SWEEP)])
    return rows


def silence_rows(quiets: list[Quiet]) -> list[list[str]]:
    """Per silence regime: its users and messages, the share returning nothing at the
    defaults, the mean returned, and the issue's target."""
    return [
        [q.silence.name, f"{q.silence.holder} ({len({a.user for a in q.silence.asks})})",
         str(len(q.silence.asks)), nothing(q.default), mean_returned(q.default),
         TARGETS.get(q.silence.name, "-")]
        for q in quiets
    ]  # fmt: skip


def report(
    outcomes: list[Outcome],
    quiets: list[Quiet],
    fusion: FusionModel,
    run: dict[str, str],
    settings: Settings,
) -> str:
    """The section of docs/benchmarks.md; `run` holds the command, revision and model."""
    recall, per_cat, defaults, latency = [], [], [], []
    for out in outcomes:
        label = LABELS[out.regime.name]
        for mode in MODES:
            at_k, by_category = recall_rows(out, mode)
            recall.append([label, mode, *at_k])
            per_cat.append([label, mode, *by_category])
            defaults.append([label, mode, *at_defaults(out.questions, out.defaults[mode])])
        defaults.append([label, "(none given)", *at_defaults(out.questions, out.default)])
        p = {m: percentiles(out.times[m], [50, 95]) for m in MODES}
        (base50, base95) = p["semantic"]
        latency += [
            [label, m, f"{p50:.2f}", f"{p95:.2f}", f"{p50 / base50:.2f}", f"{p95 / base95:.2f}"]
            for m, (p50, p95) in p.items()
        ]
    first = outcomes[0].questions if outcomes else []
    counts = {c: sum(q.category == c for q in first) for c in CATEGORIES}
    regimes = "\n".join(f"- {LABELS[o.regime.name]}: {describe(o)}" for o in outcomes)
    threshold = settings.similarity_threshold
    mismatches = sum(sweep_mismatches(o.default, o.sweep, threshold) for o in outcomes) + sum(
        sweep_mismatches(q.default, q.sweep, threshold) for q in quiets
    )
    limits = f"limit {settings.max_memories}, threshold {settings.similarity_threshold}"
    sweep_table = table(
        ["regime", "measure", *(f"{t:.1f}" for t in SWEEP)], sweep_rows(outcomes, quiets)
    )
    silence_table = table(
        ["regime", "users asked", "messages", "nothing returned %", "memories returned (mean)",
         "target %"],
        silence_rows(quiets),
    )  # fmt: skip
    recall_table = table(
        ["regime", "mode"] + [f"{which}@{k}" for which in ("any", "all") for k in KS], recall
    )
    category_table = table(
        ["regime", "mode"] + [f"{name} (n={counts[c]})" for c, name in CATEGORIES.items()],
        per_cat,
    )
    defaults_table = table(
        ["regime", "mode", "evidence reached %", "memories returned (mean)", "other sessions %",
         "own echo first %", "any echo first %"],
        defaults,
    )  # fmt: skip
    latency_table = table(
        ["regime", "mode", "p50 ms", "p95 ms", "p50 ratio to semantic", "p95 ratio to semantic"],
        latency,
    )
    return f"""## Retrieval quality on LoCoMo (dev split)

`{run["command"]}` on {machine()}, commit {run["revision"]}, {datetime.now():%Y-%m-%d}.
{len(first)} questions (categories 1-4), one memory per turn pair, {run["model"]},
fusion model {fusion}.
Each regime asks every question once, of its own users (benchmarks/harness/regimes.py):

{regimes}

Recall in % (evidence in the top k; limit 10, no threshold):

{recall_table}

Per category, any@5:

{category_table}

At the defaults: what `store.search(user, text, mode=mode)` returns (limit 3, threshold 0.5;
hybrid is the default mode; the threshold applies in hybrid mode to the calibrated relevance,
in semantic mode to the cosine, in keyword mode not at all); mode "(none given)" is
`store.search(user, text)`, the store's own defaults, whatever ranking is behind them.
"Other sessions" is the share of the returned memories from sessions without evidence (echoes
included); "echo first" the share of the questions whose first result is their own echo, or
any echo:

{defaults_table}

Silence at the store's defaults (`store.search(user, text)`: {limits}):
messages that none of the user's memories answers, which should return nothing (issue 29;
benchmarks/harness/silence.py).
silence-other asks each full-regime user every question of the other conversations, their two
speakers renamed as the user's two (speaker_a as speaker_a, speaker_b as speaker_b, short and
misspelt forms too), so no name gives them away; small-talk asks each full-regime user every
line of benchmarks/data/small_talk.json (greetings, thanks, arithmetic, translation, general
knowledge, writing and coding requests; held out); silence-small asks small-regime users
renamed questions of other conversations (a seeded sample of user and question pairs):

{silence_table}

Reach and silence per threshold (the store's defaults otherwise; one search at threshold 0,
its results cut at each threshold by `Memory.score`, which is what the threshold compares;
{mismatches} of the searches at the defaults differ from that cut at the default threshold).
Reach: the question's evidence is among what returns; nothing returned: silence:

{sweep_table}

Store query latency at the defaults (precomputed query vector: database and fusion only; the
modes take turns in blocks of 25 questions, same run):

{latency_table}
"""


def describe(out: Outcome) -> str:
    """One line on a regime's users and their memories."""
    sizes = list(out.sizes.values())
    line = (
        f"{len(sizes)} users, {sum(sizes)} memories ({min(sizes)} to {max(sizes)} a user, "
        f"mean {statistics.mean(sizes):.0f})"
    )
    echoes = len({m for t in (q.target for q in out.questions) for m in t.echoes})
    if out.regime.name == "small":
        line += (
            ": each holds a question's evidence sessions and two other sessions of its "
            "conversation (seeded), shared by the questions that come to the same sessions"
        )
    if echoes:
        line += (
            f", {echoes} of them echoes: one per question (a question asked twice in a "
            f'conversation is stored once), the question and "I\'m not sure.", dated a day '
            "after the conversation's last session"
        )
    return line


async def ask_silence(store: MemoryStore, silence: Silence) -> Quiet:
    """A silence regime's messages embedded (each text once) and asked at the defaults, and
    at threshold 0."""
    started = time.perf_counter()
    asks: list[Unanswered] = silence.asks
    quiet = Quiet(silence, await embed_queries(store, [a.text for a in asks]))
    quiet.default, quiet.sweep = await ask_unset(
        store, [(a.user, a.text, v) for a, v in zip(asks, quiet.vectors, strict=True)]
    )
    print(f"{silence.name}: {len(asks)} messages asked in {time.perf_counter() - started:.1f} s")
    return quiet


async def main() -> None:
    """Load the regimes' users, ask every question in every mode and every silence regime's
    messages at the defaults; print and write."""
    options = parser(__doc__, data=True)
    options.add_argument("--fit", action="store_true", help="refit the fusion model first")
    options.add_argument("--candidates", type=int, default=None, help="hybrid candidates per side")
    options.add_argument(
        "--conversations", type=int, default=None, help="the first N conversations only"
    )
    every = [*REGIMES, *SILENCES]
    options.add_argument(
        "--regimes", default=",".join(every), help="comma-separated, of: " + ", ".join(every)
    )
    options.add_argument(
        "--model", default=DEFAULT_EMBEDDING_MODEL, help="RECALL_EMBEDDING_MODEL for the store"
    )
    args = options.parse_args()
    given_names = args.regimes.split(",")
    if not given_names or set(given_names) - set(every):
        raise SystemExit(f"--regimes takes some of {', '.join(every)}, not {args.regimes}")
    if args.fit and "full" not in given_names:
        raise SystemExit("--fit fits on the full regime: include it in --regimes")
    quiet_names = [n for n in SILENCES if n in given_names]
    asked = [n for n in REGIMES if n in given_names]
    # a silence regime asks the users of another: stored, its own questions not asked
    names = [n for n in REGIMES if n in asked or n in {SILENCES[q] for q in quiet_names}]
    revision = git_revision()
    corpus = load(args.data, args.conversations)
    regimes = [REGIMES[name](corpus) for name in names]
    url = await fresh_database("recall_bench_locomo")
    settings = Settings(database_url=url, embedding_cache_ttl=0, embedding_model=args.model)
    if args.candidates:
        settings = settings.replace(hybrid_candidates=args.candidates)
    async with MemoryStore.connect(settings) as store:
        started = time.perf_counter()
        vectors = await embed(store, corpus, echoes="repeated" in names)
        print(
            f"{len(corpus.turns)} turn pairs and {len(corpus.questions)} questions "
            f"({corpus.skipped_questions} without usable evidence, {corpus.skipped_evidence} "
            f"evidence entries skipped) embedded in {time.perf_counter() - started:.1f} s"
        )
        outcomes = [await store_regime(store, corpus, regime, vectors) for regime in regimes]
        await settle(url)
        # the report gives the store's ranker where it is the fusion, else the shipped fusion
        fusion = store.ranker if isinstance(store.ranker, FusionModel) else default_fusion()
        if args.fit:
            fusion = await fit(store, outcomes[names.index("full")].questions)
            if isinstance(store.ranker, FusionModel):  # the second stage stays where it ranks
                store.ranker = fusion
        outcomes_asked = [out for out in outcomes if out.regime.name in asked]
        for out in outcomes_asked:
            out.ranked = await ask(store, out.questions)  # also warms each user's pages and plan
            for mode, (times, results) in (await ask_defaults(store, out.questions)).items():
                out.times[mode], out.defaults[mode] = times, results
            out.default, out.sweep = await ask_unset(
                store, [(q.user, q.text, q.vector) for q in out.questions]
            )
            print(f"{out.regime.name}: {len(out.questions)} questions asked")
        lines = small_talk()
        quiets = [
            await ask_silence(store, silence(name, corpus, regimes[names.index(holder)], lines))
            for name, holder in ((n, SILENCES[n]) for n in quiet_names)
        ]

    model = None if args.model == DEFAULT_EMBEDDING_MODEL else args.model
    given = [("--fit", args.fit), ("--candidates", args.candidates),
             ("--conversations", args.conversations),
             ("--regimes", args.regimes if given_names != every else None),
             ("--model", model)]  # fmt: skip
    command = " ".join(["python benchmarks/locomo.py"] + [
        name if value is True else f"{name} {value}" for name, value in given if value
    ])  # fmt: skip
    run_info = {"command": command, "revision": revision, "model": args.model}
    body = report(outcomes_asked, quiets, fusion, run_info, settings)
    publish("locomo", body, write=not args.no_write)


if __name__ == "__main__":
    run(main)
