"""A new user's paraphrases (issue 29): 12 facts told in one thread, each asked about in another
thread with no content word in common, at the store's defaults; and small talk asked of that
user, which should return nothing.

    python benchmarks/probe.py [--models all-MiniLM-L6-v2,bge-small-en-v1.5]

The data is held out (benchmarks/data/paraphrase_probe.json and small_talk.json): no one tunes
to it, and this section shows counts only. Per model, a fresh database: the thread (16 turns,
greetings among the facts) stored for a new user through `MemoryStore.add_turns`, the store's
model embedding it; then each question and each small-talk line goes to
`store.search(user, text)` (no mode, limit or threshold given), the text embedded by the store.
Counted: the right fact first, the right fact among what returns, nothing returned, and the
small-talk lines that return nothing; and the same per threshold 0.1 to 0.9, cut from one search
at threshold 0 (the threshold compares `Memory.score`: benchmarks/harness/silence.py). Writes
docs/benchmarks.md (section "probe").
"""

from __future__ import annotations

from datetime import datetime

from harness.db import fresh_database
from harness.heldout import Probe, paraphrase_probe, small_talk
from harness.report import git_revision, machine, publish, table
from harness.run import parser, run
from harness.silence import SWEEP, passing, sweep_mismatches

from recall.config import DEFAULT_EMBEDDING_MODEL, Settings
from recall.embeddings.bge import BGE_MODEL_NAME
from recall.memory import Memory
from recall.store import MemoryStore

USER = "probe-user"
# the measures of `counts` shown per threshold, by position
SWEPT = [(0, "right fact first"), (1, "right fact returned"), (2, "nothing returned"),
         (4, "small talk: nothing returned %")]  # fmt: skip
Asked = tuple[list[list[Memory]], list[list[Memory]]]  # per text: at the defaults, threshold 0


async def ask(store: MemoryStore, texts: list[str]) -> Asked:
    """Each text at the store's defaults, and at threshold 0."""
    default, sweep = [], []
    for text in texts:
        default.append(await store.search(USER, text))
        sweep.append(await store.search(USER, text, similarity_threshold=0.0))
    return default, sweep


async def probe_model(model: str, probe: Probe, lines: list[str]) -> tuple[list[str], Asked, Asked]:
    """The probe on a fresh database with `model`: the fact memories' ids (by fact number),
    the questions' results and the small-talk lines' results."""
    url = await fresh_database("recall_bench_probe")
    settings = Settings(database_url=url, embedding_cache_ttl=0, embedding_model=model)
    async with MemoryStore.connect(settings) as store:
        ids = await store.add_turns(
            {"user_id": USER, "user_message": t.user, "ai_response": t.assistant,
             "conversation_id": "probe-told"}
            for t in probe.thread
        )  # fmt: skip
        facts = [""] * len(probe.questions)
        for turn, memory in zip(probe.thread, ids, strict=True):
            if turn.fact is not None:
                facts[turn.fact] = memory
        questions = await ask(store, [q for q, _fact in probe.questions])
        talk = await ask(store, lines)
        mismatches = sweep_mismatches(*questions, settings.similarity_threshold)
        mismatches += sweep_mismatches(*talk, settings.similarity_threshold)
        if mismatches:
            print(f"{model}: {mismatches} searches at the defaults differ from the sweep's cut")
    return facts, questions, talk


def counts(
    probe: Probe, facts: list[str], questions: list[list[Memory]], talk: list[list[Memory]]
) -> list[str]:
    """Right fact first, right fact returned, nothing returned (of the questions), memories
    returned per question (mean), and small talk returning nothing in %."""
    wanted = [facts[fact] for _q, fact in probe.questions]
    first = sum(
        bool(found) and found[0].id == w for w, found in zip(wanted, questions, strict=True)
    )
    among = sum(w in {m.id for m in found} for w, found in zip(wanted, questions, strict=True))
    n = len(questions)
    return [
        f"{first} of {n}",
        f"{among} of {n}",
        f"{sum(not found for found in questions)} of {n}",
        f"{sum(map(len, questions)) / max(n, 1):.2f}",
        f"{100 * sum(not found for found in talk) / max(len(talk), 1):.1f}",
    ]


async def main() -> None:
    """The probe with each model; print and write."""
    options = parser(__doc__)
    models = dict.fromkeys([DEFAULT_EMBEDDING_MODEL, BGE_MODEL_NAME])
    options.add_argument(
        "--models", default=",".join(models), help="RECALL_EMBEDDING_MODEL values, in turn"
    )
    args = options.parse_args()
    revision = git_revision()
    probe, lines = paraphrase_probe(), small_talk()
    rows, sweep_rows = [], []
    for model in args.models.split(","):
        facts, (questions, q_sweep), (talk, t_sweep) = await probe_model(model, probe, lines)
        rows.append([model, *counts(probe, facts, questions, talk)])
        by_t = {t: counts(probe, facts, [passing(f, t) for f in q_sweep],
                          [passing(f, t) for f in t_sweep]) for t in SWEEP}  # fmt: skip
        for k, measure in SWEPT:
            sweep_rows.append([model, measure, *(by_t[t][k] for t in SWEEP)])
    command = "python benchmarks/probe.py" + (
        f" --models {args.models}" if args.models != ",".join(models) else ""
    )
    settings = Settings()
    body = f"""## A new user's paraphrases, and small talk (held out)

`{command}` on {machine()}, commit {revision}, {datetime.now():%Y-%m-%d}.
A new user tells {len(probe.questions)} facts in one thread of {len(probe.thread)} turns
(greetings among them), then asks about each fact in another thread with no content word in
common ("which instrument" after "the cello"; benchmarks/data/paraphrase_probe.json, held out,
so only counts here). Each question and each of the {len(lines)} lines of
benchmarks/data/small_talk.json goes to `store.search(user, text)` at the store's defaults
(limit {settings.max_memories}, threshold {settings.similarity_threshold}); target (issue 29):
the right fact first for 10 of 12 or more, small talk returning nothing 95% or more.

{table(["model", "right fact first", "right fact returned", "nothing returned",
        "memories returned (mean)", "small talk: nothing returned %"], rows)}

Per threshold (one search at threshold 0, cut by `Memory.score`):

{table(["model", "measure", *(f"{t:.1f}" for t in SWEEP)], sweep_rows)}
"""  # fmt: skip
    publish("probe", body, write=not args.no_write)


if __name__ == "__main__":
    run(main)
