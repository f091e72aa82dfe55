"""Issue 57's report: each family measured on a student that never saw it, exported as it would
ship (ONNX int8, `harness.student.export_int8`), against the shipped bge-small, by cosine alone,
question by question; and the cost of a query, the two models taking turns.

    python benchmarks/student_report.py --student facts=.recall/students/student-facts-300.pt \\
        --student restatement=... --student locomo=... --student realmem=... \\
        --student longmemeval=... [--every 4] [--timed STATE]

`--student FAMILY=STATE` names the student measured on FAMILY: one that never trained on it
(`distil_student.py --hold-out FAMILY`; no student trains on RealMem's queries or on
LongMemEval, and only `--corpus turns` puts RealMem's turns in). `--timed` names the student
whose query cost is timed against bge-small's. Families: facts (the fresh fact users 9-16:
top-1 and top-3), restatement (the fresh restatement probe's control user, both questions of
each of its 30 facts), locomo (LoCoMo dev, any@1/3/5), realmem (each query whose answer used a
memory, over the sessions before it, any@1/3/5), longmemeval (every `--every`-th record of
LongMemEval dev with a `has_answer` turn, over its haystack). Bootstrap 95% over users, facts,
conversations or records; the difference paired by question; the teacher's own figure beside
them where both teachers read the family. Vectors are kept under .recall/students/ (the
student's) and .recall/teachers/ (bge-small's, LongMemEval's read from the table
`default_path.py` keeps).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from functools import cache, partial
from pathlib import Path

import numpy as np
from harness.bootstrap import shown
from harness.distil_cases import (
    Case,
    Scores,
    blended,
    fact_cases,
    hit_at,
    locomo_cases,
    longmemeval_cases,
    realmem_cases,
    restatement_cases,
    table_cosines,
)
from harness.longmemeval import VECTORS as LME_VECTORS
from harness.report import git_revision, machine, publish
from harness.run import parser, run
from harness.student import export_int8
from harness.teachers import TEACHERS
from harness.vectorcache import embed_missing, save, saved

from recall.embeddings import BgeSmallEmbeddings, Embedder

FRESH_PROBE = "restatement_probe_fresh.json"
REPORTED: dict[str, tuple[int, ...]] = {
    "facts": (1, 3),
    "restatement": (1, 3),
    "locomo": (1, 3, 5),
    "realmem": (1, 3, 5),
    "longmemeval": (1, 3, 5),
}
"""Each family reported and its k."""
Table = tuple[dict[str, np.ndarray], Path]  # a kept vector table and its file


def _cases(family: str, every: int) -> list[Case]:
    makers: dict[str, Callable[[], list[Case]]] = {
        "facts": partial(fact_cases, ("fresh",)),
        "restatement": partial(restatement_cases, FRESH_PROBE),
        "locomo": locomo_cases,
        "realmem": realmem_cases,
        "longmemeval": partial(longmemeval_cases, every),
    }
    return makers[family]()


async def _cosines(
    embedder: Embedder, table: Table, cases: Sequence[Case], label: str
) -> list[np.ndarray]:
    """Each case's cosines by `embedder`, the vectors its kept table lacks embedded and kept."""
    vectors, path = table
    await embed_missing(embedder, [d for c in cases for d in c.docs], "doc", vectors, path, label)
    await embed_missing(embedder, [c.question for c in cases], "query", vectors, path, label)
    return [table_cosines(vectors, c) for c in cases]


def _bge_table() -> Path:
    """bge-small's table (the teachers'), with LongMemEval's haystack vectors added from the
    table `default_path.py` keeps (keyed by the text's hash alone) the first time."""
    path = TEACHERS / "bge-vectors.npz"
    table = saved(path)
    extra = {f"doc:{k}": v for k, v in saved(LME_VECTORS).items() if f"doc:{k}" not in table}
    if extra:
        save({**table, **extra}, path)
    return path


async def _query_ms(models: Sequence[Embedder], texts: Sequence[str]) -> list[float]:
    """Each model's median ms a query over `texts`, the models taking turns text by text."""
    times: list[list[float]] = [[] for _ in models]
    for text in texts:
        for n, model in enumerate(models):
            started = time.perf_counter()
            await model.embed_query(text)
            times[n].append(1000 * (time.perf_counter() - started))
    return [statistics.median(t) for t in times]


def _taught(teacher: Scores, cases: Sequence[Case]) -> list[np.ndarray]:
    """The teacher's scores over each case (decision 0061's blend), or none where a teacher
    has not read the family (LongMemEval's haystacks)."""
    try:
        pairs = [teacher.cosines(c) for c in cases]
    except KeyError:
        return []
    teach = blended()
    return [teach(b, m) for b, m in pairs]


@cache
def _student(state: Path) -> tuple[Embedder, Table]:
    """A student's exported model (exported the first time) and its kept table, each loaded
    once a run (one student may rank several families and be timed)."""
    folder = state.parent / state.stem
    if not (folder / "model_quantized.onnx").exists():
        export_int8(state, folder)
    model = Embedder(BgeSmallEmbeddings(folder, verify=False), name=state.stem, cache_ttl=0)
    path = state.parent / f"{state.stem}-vectors.npz"
    return model, (saved(path), path)


async def main() -> None:
    """Measure each named student on its family and publish the table."""
    cli = parser(__doc__)
    cli.add_argument("--student", action="append", default=[], metavar="FAMILY=STATE")
    cli.add_argument("--every", type=int, default=4, help="LongMemEval: every n-th record")
    cli.add_argument("--timed", metavar="STATE", help="a student whose query cost is timed")
    args = cli.parse_args()
    students = dict(s.split("=", 1) for s in args.student)
    bge = Embedder(BgeSmallEmbeddings(), name="bge-small", cache_ttl=0)
    bge_path = _bge_table()
    teacher = Scores()  # its bge-small table is the one `bge` fills: read once
    bge_table = (teacher.bge, bge_path)
    rows, named = [], []
    for family, ks in REPORTED.items():
        if family not in students:
            continue
        state = Path(students[family])
        model, table = _student(state)
        named.append(f"{family}: `{state.name}`")
        cases = _cases(family, int(args.every))
        before = await _cosines(bge, bge_table, cases, "bge-small")
        after = await _cosines(model, table, cases, state.stem)
        groups = [c.group for c in cases]
        taught = _taught(teacher, cases)
        for k in ks:
            was = [hit_at(b, c.hits, k) for c, b in zip(cases, before, strict=True)]
            now = [hit_at(a, c.hits, k) for c, a in zip(cases, after, strict=True)]
            diff = [n - w for n, w in zip(now, was, strict=True)]
            ceiling = (
                shown([hit_at(t, c.hits, k) for c, t in zip(cases, taught, strict=True)], groups)
                if taught
                else "-"
            )
            rows.append(f"| {family} | {len(cases)} ({len(set(groups))}) | {k} | "
                        f"{shown(was, groups)} | {shown(now, groups)} | "
                        f"{shown(diff, groups)} | {ceiling} |")  # fmt: skip
    timing = ""
    if args.timed:
        model, _table = _student(Path(args.timed))
        asked = [c.question for c in fact_cases(("fit",))][:200]
        ms = await _query_ms([bge, model], asked)
        timing = (f" A query, the two taking turns over {len(asked)} questions: bge-small "
                  f"{ms[0]:.2f} ms, the student {ms[1]:.2f} ms (median; ratio "
                  f"{ms[1] / ms[0]:.2f}).")  # fmt: skip
    timed = f" --timed {args.timed}" if args.timed else ""
    body = "\n".join([
        "## Issue 57's student against bge-small, each family held out",
        f"`python benchmarks/student_report.py {' '.join(f'--student {s}' for s in args.student)}"
        f" --every {args.every}{timed}` on {machine()}, commit {git_revision()}. Students: "
        f"{'; '.join(named)}. Cosine alone, percent of questions with a hit among the best k "
        "(bootstrap 95%; the difference paired by question; questions (groups)); the teacher "
        "(decision 0061's blend of bge-small and all-mpnet-base-v2, from the kept vectors) is "
        "what the student was taught to rank, its ceiling." + timing,
        "",
        "| family | questions (groups) | k | bge-small | student | difference | teacher |",
        "|---|---|---|---|---|---|---|",
        *rows,
    ])  # fmt: skip
    publish("student-report", body, write=not args.no_write)


if __name__ == "__main__":
    run(main)
