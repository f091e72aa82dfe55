"""The benchmarks' layout and shared library (benchmarks/harness): one script per question, each
started through `harness.run.run` (logging as deployed), none imported by another; compared
systems timed in turns; each script's section of docs/benchmarks.md replaced in place."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

if TYPE_CHECKING:
    from harness.corpus import Corpus
    from harness.regimes import Regime

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
SCRIPTS = sorted(BENCHMARKS.glob("*.py"))
DOC = BENCHMARKS.parent / "docs" / "benchmarks.md"


@pytest.fixture(autouse=True)
def _benchmarks_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # as `python benchmarks/<script>.py` has it


def _main_block(tree: ast.Module) -> list[ast.stmt]:
    for node in tree.body:
        if (
            isinstance(node, ast.If)
            and isinstance(node.test, ast.Compare)
            and isinstance(node.test.left, ast.Name)
            and node.test.left.id == "__name__"
        ):
            return node.body
    return []


def _imported_from(tree: ast.Module) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.setdefault(node.module, set()).update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            out.update({alias.name: set() for alias in node.names})
    return out


def test_the_suite_is_the_scripts_that_remain() -> None:
    assert [p.stem for p in SCRIPTS] == [
        "basestore", "consolidation", "default_parts", "default_path", "distil_student",
        "embedding", "fact_probe",
        "first_run", "fit_intent", "fit_second_stage", "gate_dump", "gate_rule",
        "knowledge_update", "latency", "load", "locomo", "probe", "realmem",
        "replica", "restatement_probe", "same_results", "scale_out", "store_breadth",
        "student_report", "sync_graphs", "teacher_probe", "teacher_vectors", "time_probe",
        "write_cost",
    ]  # fmt: skip


def _doc_rows() -> list[tuple[str, str]]:
    """(script, the rest of its row) for each table row of docs/benchmarks.md whose first
    column names a script under benchmarks/."""
    return re.findall(r"^\| `benchmarks/(\w+)\.py` \|(.*)$", DOC.read_text("utf-8"), re.M)


def test_the_docs_name_every_script_that_remains_and_where_each_retired_one_lies() -> None:
    """Decision 0045: docs/benchmarks.md's table of scripts names exactly the scripts under
    benchmarks/; a retired script's row names instead the commit to read it from."""
    rows = _doc_rows()
    retired = {name: row for name, row in rows if "git show" in row}
    listed = sorted(name for name, row in rows if "git show" not in row)
    assert listed == [p.stem for p in SCRIPTS]
    assert retired and not set(retired) & set(listed)
    for name, row in retired.items():
        assert re.search(rf"`git show [0-9a-f]{{7,40}}:benchmarks/{name}\.py`", row), name


def test_each_retired_script_lies_in_the_commit_the_docs_name() -> None:
    """The `git show` of each retired script's row finds the file (where the checkout has its
    history: not in an sdist or a shallow clone)."""
    git = shutil.which("git")
    if git is None:
        pytest.skip("no git here")
    where = [git, "-C", str(BENCHMARKS.parent)]
    shallow = subprocess.run(
        [*where, "rev-parse", "--is-shallow-repository"], capture_output=True, text=True
    )
    if shallow.returncode != 0 or shallow.stdout.strip() != "false":
        pytest.skip("no full git history here")
    pointer = re.compile(r"`git show ([0-9a-f]{7,40}:benchmarks/\w+\.py)`")
    pointers = [at for _name, row in _doc_rows() for at in pointer.findall(row)]
    assert pointers
    missing = [
        at
        for at in pointers
        if subprocess.run([*where, "cat-file", "-e", at], capture_output=True).returncode != 0
    ]
    assert not missing, missing


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_each_benchmark_starts_through_lib_run_and_publishes_its_section(script: Path) -> None:
    tree = ast.parse(script.read_text())
    imported = _imported_from(tree)
    assert {"parser", "run"} <= imported["harness.run"]
    assert "publish" in imported["harness.report"]
    (stmt,) = _main_block(tree)
    assert ast.unparse(stmt) == "run(main)"
    publishes = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "publish"
    ]
    assert [ast.unparse(kw) for call in publishes for kw in call.keywords] == [
        "write=not args.no_write"
    ]


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_no_script_is_another_scripts_library(script: Path) -> None:
    imported = _imported_from(ast.parse(script.read_text()))
    scripts = {p.stem for p in SCRIPTS}
    assert not {module.split(".")[0] for module in imported} & scripts


def test_the_library_imports_no_script() -> None:
    scripts = {p.stem for p in SCRIPTS}
    for module in sorted((BENCHMARKS / "harness").glob("*.py")):
        imported = _imported_from(ast.parse(module.read_text()))
        assert not {name.split(".")[0] for name in imported} & scripts, module.name


@pytest.mark.parametrize("kind", ["async def", "def"])
def test_run_configures_logging_before_main(tmp_path: Path, kind: str) -> None:
    script = tmp_path / "bench.py"
    script.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(BENCHMARKS)!r})\n"
        "import structlog\n"
        "from harness.run import run\n"
        f"{kind} main():\n"
        "    log = structlog.stdlib.get_logger('recall.bench')\n"
        "    log.debug('bench.debug', n=1)\n"
        "    log.info('bench.info', n=2)\n"
        "run(main)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "RECALL_LOG_LEVEL"}
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, check=True, env=env
    )
    events = [json.loads(line) for line in out.stderr.splitlines() if line.startswith("{")]
    assert [e["event"] for e in events] == ["bench.info"]
    assert events[0]["level"] == "info" and events[0]["n"] == 2
    assert "bench.debug" not in out.stderr + out.stdout


def test_parser_has_no_write_and_the_locomo_file_when_asked() -> None:
    from harness.corpus import LOCOMO
    from harness.run import parser

    assert parser("doc").parse_args([]).no_write is False
    assert parser("doc").parse_args(["--no-write"]).no_write is True
    assert not hasattr(parser("doc").parse_args([]), "data")
    assert parser("doc", data=True).parse_args([]).data == LOCOMO


def _recorder(ran: list[tuple[str, int]]) -> Callable[[str, int], Callable[[], Awaitable[object]]]:
    def call(name: str, i: int) -> Callable[[], Awaitable[object]]:
        async def run() -> tuple[str, int]:
            ran.append((name, i))
            return name, i

        return run

    return call


async def test_timed_interleaved_takes_turns_in_blocks_and_turns_the_order() -> None:
    from harness.timing import timed_interleaved

    ran: list[tuple[str, int]] = []
    call = _recorder(ran)
    calls = {name: [call(name, i) for i in range(5)] for name in ("ours", "theirs")}
    out = await timed_interleaved(calls, block=2)

    assert ran == [
        ("ours", 0), ("ours", 1), ("theirs", 0), ("theirs", 1),  # block 0: ours first
        ("theirs", 2), ("theirs", 3), ("ours", 2), ("ours", 3),  # block 1: theirs first
        ("ours", 4), ("theirs", 4),  # the last, short block: ours first again
    ]  # fmt: skip
    for name in calls:
        times, results = out[name]
        assert results == [(name, i) for i in range(5)]  # in the queries' order
        assert len(times) == 5 and all(t >= 0 for t in times)


async def test_timed_interleaved_goes_on_turning_from_first_turn() -> None:
    from harness.timing import blocks, timed_interleaved

    ran: list[tuple[str, int]] = []
    call = _recorder(ran)
    calls = {name: [call(name, i) for i in range(2)] for name in ("a", "b", "c")}
    for round_ in range(2):  # a caller's rounds over the same lists, turning on
        await timed_interleaved(calls, block=1, first_turn=round_ * blocks(2, block=1))

    assert [name for name, _i in ran] == [
        "a", "b", "c", "b", "c", "a",  # round 0: turns 0 and 1
        "c", "a", "b", "a", "b", "c",  # round 1: turns 2 and 3, not 0 and 1 again
    ]  # fmt: skip


async def test_timed_interleaved_refuses_systems_with_different_queries() -> None:
    from harness.timing import timed_interleaved

    async def nothing() -> None:
        return None

    with pytest.raises(ValueError, match="same number of calls"):
        await timed_interleaved({"ours": [nothing] * 3, "theirs": [nothing] * 2}, block=2)


def test_counts_reads_the_option_and_requires_the_default() -> None:
    from harness.run import counts

    assert counts("2,4,10,20", default=10, option="--sizes") == [2, 4, 10, 20]
    with pytest.raises(SystemExit, match=r"--sizes must include the default \(10\)"):
        counts("2,4", default=10, option="--sizes")


def test_rotated_starts_each_turn_one_further() -> None:
    from harness.timing import rotated

    assert [rotated([2, 4, 10], turn) for turn in range(4)] == [
        [2, 4, 10], [4, 10, 2], [10, 2, 4], [2, 4, 10],
    ]  # fmt: skip
    assert rotated([2, 4, 10], -1) == [10, 2, 4]  # a warm-up round before turn 0 wraps


def test_percentiles_default_to_p50_p95_p99() -> None:
    from harness.timing import percentiles

    values = [float(v) for v in range(1, 101)]
    assert percentiles(values) == pytest.approx([50.5, 95.05, 99.01])
    assert percentiles(values, [0, 100]) == [1.0, 100.0]


def test_write_section_replaces_its_own_section_only_and_appends_a_new_one(
    tmp_path: Path,
) -> None:
    from harness.report import write_section

    doc = tmp_path / "benchmarks.md"
    doc.write_text(
        "# Benchmarks\n\nintro\n\n<!-- a:start -->\nold a\n<!-- a:end -->\n\n"
        "<!-- b:start -->\nold b\n<!-- b:end -->\n"
    )
    write_section("a", "new a\n", doc)
    write_section("c", "new c", doc)
    assert doc.read_text() == (
        "# Benchmarks\n\nintro\n\n<!-- a:start -->\nnew a\n<!-- a:end -->\n\n"
        "<!-- b:start -->\nold b\n<!-- b:end -->\n\n<!-- c:start -->\nnew c\n<!-- c:end -->\n"
    )


def test_table_is_markdown() -> None:
    from harness.report import table

    assert table(["a", "b"], [[1, "x"], [2.5, None]]) == (
        "| a | b |\n|---|---|\n| 1 | x |\n| 2.5 | None |"
    )


@pytest.mark.parametrize(
    ("n", "large_users", "large_size"),
    [(1_000, 1, 250), (100_000, 1, 25_000), (1_000_000, 5, 50_000)],
)
def test_skewed_users_hold_every_memory_a_quarter_in_large_users(
    n: int, large_users: int, large_size: int
) -> None:
    from harness.data import skewed_users

    users = skewed_users(n, np.random.default_rng(n))
    large = {u: size for u, size in users.items() if u.startswith("large")}
    typical = sorted(size for u, size in users.items() if u not in large)
    assert sum(users.values()) == n
    assert list(large.values()) == [large_size] * large_users
    assert typical[-1] <= 1000 and typical[1] >= 10  # the last user made may hold fewer


def test_exact_top_is_the_users_nearest_memories() -> None:
    from harness.data import DIMS, Data, exact_top, queries_for, unit

    rng = np.random.default_rng(0)
    vectors = unit(rng.normal(size=(50, DIMS)))
    data = Data(
        {"u": 50}, {"u": [("a", "b")] * 50}, {"u": vectors}, {"u": [f"m{i}" for i in range(50)]}
    )
    q = vectors[7]
    assert "m7" in exact_top(data, "u", q)
    cosines = vectors @ q
    assert exact_top(data, "u", q, k=5) == {f"m{i}" for i in np.argsort(-cosines)[:5]}
    ((user, query),) = queries_for(data, ["u"], 1, rng)
    assert user == "u" and np.linalg.norm(query) == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize(("total", "count"), [(100_000, 1_000), (5_000, 100), (7, 7)])
def test_skewed_namespaces_hold_every_item_each_at_least_one(total: int, count: int) -> None:
    from harness.items import skewed_sizes

    sizes = skewed_sizes(total, count, np.random.default_rng(total))
    assert len(sizes) == count and int(sizes.sum()) == total and int(sizes.min()) >= 1
    if total == 100_000:  # the shape: a few items to a few thousand
        assert int(sizes.min()) <= 5 and 1_000 < int(sizes.max()) < 10_000
    with pytest.raises(ValueError, match="cannot fill"):
        skewed_sizes(3, 4, np.random.default_rng(0))


async def test_items_answer_their_queries_exactly_and_embed_by_lookup() -> None:
    from harness.items import PREFIX, bucket, bucket_labels, key, make_items

    items = make_items(600, 20, 2, np.random.default_rng(1))
    puts = list(items.puts())
    assert len(puts) == 600 and len(items.queries) == 40
    assert {op.namespace for op in puts} == set(items.namespaces)
    first = puts[0]
    assert first.value == {"text": "item-0-0", "n": 0} and first.key == key(0)
    assert await items.embed(["item-0-0"]) == [items.rows(0)[0].tolist()]
    for q in items.queries[:5]:
        rows = items.rows(q.namespace)
        top = items.exact_top(q, 10)
        assert len(top) == min(10, len(rows))
        assert top == [key(int(i)) for i in np.argsort(-(rows @ q.vector))[: len(top)]]
        assert await items.embed([q.text]) == [q.vector.tolist()]
    assert [bucket(n) for n in (1, 9, 10, 999, 1000, 50_000)] == [
        "1-9", "1-9", "10-99", "100-999", "1,000-9,999", "10,000+",
    ]  # fmt: skip
    assert bucket_labels() == ["1-9", "10-99", "100-999", "1,000-9,999", "10,000+"]
    wide = make_items(600, 20, 2, np.random.default_rng(1), large=[300], per_large=4, everywhere=3)
    assert len(wide.namespaces) == 21 and int(wide.sizes[-1]) == 300
    assert sum(q.namespace == 20 for q in wide.queries) == 4
    everywhere = [q for q in wide.queries if q.namespace == PREFIX]
    assert len(everywhere) == 3
    nearest = wide.exact_top_everywhere(everywhere[0], 10)
    sims = {(ns, key(i)): float(wide.rows(j)[i] @ everywhere[0].vector)
            for j, ns in enumerate(wide.namespaces) for i in range(int(wide.sizes[j]))}  # fmt: skip
    assert nearest == sorted(sims, key=lambda k: -sims[k])[:10]


def _conversation(
    name: str, sessions: int, questions: list[tuple[str, list[str], int]]
) -> dict[str, Any]:
    """A LoCoMo-shaped sample: `sessions` sessions of 4 turns (2 pairs), a day apart."""
    conversation: dict[str, object] = {"speaker_a": "Ann", "speaker_b": "Bob"}
    for n in range(1, sessions + 1):
        conversation[f"session_{n}_date_time"] = f"1:56 pm on {n} May, 2023"
        conversation[f"session_{n}"] = [
            {"speaker": ("Ann", "Bob")[t % 2], "dia_id": f"D{n}:{t + 1}",
             "text": f"{name} session {n} turn {t + 1}"}
            for t in range(4)
        ]  # fmt: skip
    qa = [{"question": q, "answer": "a", "evidence": ev, "category": cat}
          for q, ev, cat in questions]  # fmt: skip
    return {"sample_id": name, "conversation": conversation, "qa": qa}


@pytest.fixture
def corpus_file(tmp_path: Path) -> Path:
    path = tmp_path / "locomo.json"
    first = _conversation(
        "conv-a",
        6,
        [
            ("Where did Ann go?", ["D2:1"], 4),
            ("Who came along?", ["D2:3", "D4:2"], 1),
            ("When was it?", ["D2:2"], 2),  # the same evidence session as the first
            ("What was unanswerable?", [], 5),  # category 5: not asked
            ("Where did Ann go?", ["D5:4"], 4),  # asked twice in the file
        ],
    )
    second = _conversation("conv-b", 5, [("What did Bob say?", ["D1:1; D3:4"], 4)])
    path.write_text(json.dumps([first, second]))
    return path


def test_load_gives_each_pair_its_session(corpus_file: Path) -> None:
    from harness.corpus import load

    corpus = load(corpus_file)
    assert len(corpus.turns) == len(corpus.sessions) == 2 * (6 + 5)
    assert corpus.sessions[:4] == [1, 1, 2, 2]
    for turn, session in zip(corpus.turns, corpus.sessions, strict=True):
        assert turn["conversation_id"] == f"{turn['user_id']}-session-{session}"
    assert [q[1] for q in corpus.questions] == [
        "Where did Ann go?", "Who came along?", "When was it?", "Where did Ann go?",
        "What did Bob say?",
    ]  # fmt: skip


def test_full_regime_is_one_user_per_conversation_with_every_pair(corpus_file: Path) -> None:
    from harness.corpus import load
    from harness.regimes import full

    corpus = load(corpus_file)
    regime = full(corpus)
    assert regime.users() == ["conv-a", "conv-b"]
    assert [item.pair for item in regime.items] == list(range(len(corpus.turns)))
    assert all(item.user == corpus.turns[item.pair or 0]["user_id"] for item in regime.items)
    assert [(a.question, a.user) for a in regime.asks] == [
        (0, "conv-a"), (1, "conv-a"), (2, "conv-a"), (3, "conv-a"), (4, "conv-b"),
    ]  # fmt: skip


def _held_sessions(corpus: Corpus, regime: Regime, user: str) -> dict[int, list[int]]:
    held: dict[int, list[int]] = {}
    for item in regime.items:
        if item.user == user:
            assert item.pair is not None and item.echo is None
            held.setdefault(corpus.sessions[item.pair], []).append(item.pair)
    return held


def test_a_small_user_holds_the_evidence_sessions_and_exactly_two_others(
    corpus_file: Path,
) -> None:
    from harness.corpus import load
    from harness.regimes import evidence_sessions, small_users

    corpus = load(corpus_file)
    regime = small_users(corpus)
    assert len(regime.asks) == len(corpus.questions)
    for ask in regime.asks:
        conv = corpus.questions[ask.question][0]
        held = _held_sessions(corpus, regime, ask.user)
        evidence = evidence_sessions(corpus, ask.question)
        assert evidence <= set(held)
        assert len(set(held) - evidence) == 2
        assert ask.user == f"{conv}-small-" + "-".join(str(s) for s in sorted(held))
        for session, pairs in held.items():  # whole sessions of the question's conversation
            assert pairs == [i for i, t in enumerate(corpus.turns)
                             if t["user_id"] == conv and corpus.sessions[i] == session]  # fmt: skip
    users = [ask.user for ask in regime.asks]
    assert users[0] == users[2]  # the same evidence sessions: one user
    assert len(regime.users()) == len(set(users))
    assert evidence_sessions(corpus, 4) == {1, 3}  # two ids in one evidence entry


def test_small_users_are_picked_the_same_whatever_else_is_loaded(corpus_file: Path) -> None:
    from harness.corpus import load
    from harness.regimes import small_users

    both = small_users(load(corpus_file))
    alone = small_users(load(corpus_file, conversations=1))
    assert small_users(load(corpus_file)) == both
    assert [a.user for a in alone.asks] == [a.user for a in both.asks][:4]
    other_seed = small_users(load(corpus_file), seed=21)
    assert [a.user for a in other_seed.asks] != [a.user for a in both.asks]


def test_a_conversation_with_few_sessions_gives_its_small_users_all_there_are(
    tmp_path: Path,
) -> None:
    from harness.corpus import load
    from harness.regimes import small_users

    path = tmp_path / "short.json"
    path.write_text(json.dumps([_conversation("conv-c", 2, [("Q?", ["D1:1"], 4)])]))
    corpus = load(path)
    (ask,) = small_users(corpus).asks
    assert ask.user == "conv-c-small-1-2"


def test_the_repeated_regime_stores_one_echo_per_question_after_the_last_session(
    corpus_file: Path,
) -> None:
    from harness.corpus import load
    from harness.regimes import ECHO_REPLY, Vectors, repeated, turn_items

    corpus = load(corpus_file)
    regime = repeated(corpus)
    assert regime.users() == ["conv-a-repeated", "conv-b-repeated"]
    echoes = [item for item in regime.items if item.echo is not None]
    assert sorted(item.echo for item in echoes if item.echo is not None) == list(
        range(len(corpus.questions))
    )
    for item in echoes:
        assert item.user == corpus.questions[item.echo or 0][0] + "-repeated"
    pairs = [item.pair for item in regime.items if item.pair is not None]
    assert pairs == list(range(len(corpus.turns)))  # every pair, once
    assert [(a.question, a.user) for a in regime.asks] == [
        (q, f"{user}-repeated") for q, (user, *_rest) in enumerate(corpus.questions)
    ]

    size = len(corpus.turns)
    vectors = Vectors(
        pairs=[np.full(3, i, dtype=np.float32) for i in range(size)],
        echoes=[np.full(3, -q, dtype=np.float32) for q in range(len(corpus.questions))],
        queries=[],
    )
    items = list(turn_items(corpus, regime, vectors))
    assert len(items) == size + len(corpus.questions)
    stored = [t for t in items if t["ai_response"] == ECHO_REPLY]
    assert [(t["user_id"], t["user_message"]) for t in stored] == [
        ("conv-a-repeated", "Where did Ann go?"),
        ("conv-a-repeated", "Who came along?"),
        ("conv-a-repeated", "When was it?"),
        ("conv-a-repeated", "Where did Ann go?"),
        ("conv-b-repeated", "What did Bob say?"),
    ]
    assert [float(t["embedding"][0]) for t in stored] == [0, -1, -2, -3, -4]
    for t in stored:
        conv = t["user_id"].removesuffix("-repeated")
        last = max(p["created_at"] for p in corpus.turns if p["user_id"] == conv)
        assert t["created_at"] > last
        assert t["conversation_id"] == f"{conv}-asked-before"
    dates = [t["created_at"] for t in stored[:4]]
    assert dates == sorted(dates) and len(set(dates)) == 4
    first = items[0]
    assert first["user_id"] == "conv-a-repeated" and float(first["embedding"][0]) == 0
    assert first["user_message"] == corpus.turns[0]["user_message"]


def test_turn_items_refuse_an_echo_without_vectors(corpus_file: Path) -> None:
    from harness.corpus import load
    from harness.regimes import Vectors, repeated, turn_items

    corpus = load(corpus_file)
    vectors = Vectors([np.zeros(3, dtype=np.float32)] * len(corpus.turns), None, [])
    with pytest.raises(ValueError, match="neither a pair nor an echo"):
        list(turn_items(corpus, repeated(corpus), vectors))


def test_targets_name_the_evidence_the_other_sessions_and_the_echoes(corpus_file: Path) -> None:
    from harness.corpus import load
    from harness.regimes import repeated, small_users, targets

    corpus = load(corpus_file)
    regime = repeated(corpus)
    ids = [f"m{n}" for n in range(len(regime.items))]
    twice = [n for n, item in enumerate(regime.items) if item.echo in (0, 3)]
    ids[twice[1]] = ids[twice[0]]  # asked twice, stored once: add_turns gives the id again
    found = targets(corpus, regime, ids)
    by_item = dict(zip(regime.items, ids, strict=True))
    pair_id = {item.pair: m for item, m in by_item.items() if item.pair is not None}
    echo_id = {item.echo: m for item, m in by_item.items() if item.echo is not None}

    who = found[1]  # "Who came along?": D2:3 and D4:2, in sessions 2 and 4
    assert who.evidence == {pair_id[corpus.dia_to_turn[("conv-a", d)]] for d in ("D2:3", "D4:2")}
    a_pairs = [i for i, t in enumerate(corpus.turns) if t["user_id"] == "conv-a"]
    assert who.outside == (
        {pair_id[i] for i in a_pairs if corpus.sessions[i] not in (2, 4)}
        | {echo_id[q] for q in range(4)}
    )
    assert who.echo == echo_id[1]
    assert who.echoes == {echo_id[q] for q in range(4)}
    assert found[3].echo == found[0].echo == echo_id[0] and len(who.echoes) == 3
    assert found[4].echo == echo_id[4] and found[4].echoes == {echo_id[4]}
    assert not who.evidence & who.outside

    small = small_users(corpus)
    (first, *_rest) = targets(corpus, small, [f"s{n}" for n in range(len(small.items))])
    assert first.echo is None and first.echoes == frozenset()
    assert len(first.evidence) == 1 and len(first.outside) == 2 * 2  # two sessions of 2 pairs


def test_on_locomo_every_small_user_holds_exactly_two_sessions_without_evidence() -> None:
    from harness.corpus import LOCOMO, load
    from harness.regimes import evidence_sessions, small_users

    if not LOCOMO.exists():
        pytest.skip(f"no LoCoMo dev file at {LOCOMO}")
    corpus = load()
    regime = small_users(corpus)
    held: dict[str, set[int]] = {}
    for item in regime.items:
        held.setdefault(item.user, set()).add(corpus.sessions[item.pair or 0])
    for ask in regime.asks:
        evidence = evidence_sessions(corpus, ask.question)
        assert evidence <= held[ask.user] and len(held[ask.user] - evidence) == 2
    assert len(regime.asks) == 760


def test_rename_replaces_whole_names_in_one_pass_and_keeps_possessives() -> None:
    from harness.silence import rename

    swap = {"Ann": "Bob", "Bob": "Ann", "Mel": "Gina"}
    assert rename("Did Ann meet Bob's sister?", swap) == "Did Bob meet Ann's sister?"
    assert rename("Annie and Bobby met Mel.", swap) == "Annie and Bobby met Gina."
    assert rename("What did Melanie paint?", swap) == "What did Melanie paint?"
    assert rename("No names here.", {}) == "No names here."


def test_name_forms_take_short_and_misspelt_names_and_leave_others() -> None:
    from harness.silence import name_forms

    questions = [
        "What did Mel paint?", "Who is Anthony?", "Which city did Jean and John visit?",
        "What did Johns's team win?", "What happened in March?", "What did Melanie say?",
    ]  # fmt: skip
    forms = name_forms(["Jon", "Melanie"], questions)
    assert forms == {"Jon": 0, "Melanie": 1, "Mel": 1, "John": 0}
    assert name_forms(["Tim", "John"], questions)["Johns"] == 1
    both = name_forms(["Jon", "Joanna"], ["Did Jo come?"])
    assert "Jo" not in both  # a start of both names: left as it is


def _two_pairs(name: str, speakers: tuple[str, str], questions: list[str]) -> dict[str, Any]:
    sample = _conversation(name, 2, [(q, ["D1:1"], 4) for q in questions])
    conv = sample["conversation"]
    conv["speaker_a"], conv["speaker_b"] = speakers
    return sample


def test_other_conversations_ask_every_user_the_others_questions_renamed(tmp_path: Path) -> None:
    from harness.corpus import load
    from harness.regimes import full, small_users
    from harness.silence import SILENCES, conversation_of, sampled_others, silence

    path = tmp_path / "two.json"
    first = _two_pairs("conv-a", ("Caroline", "Melanie"), ["Where did Mel go with Caroline?"])
    second = _two_pairs("conv-b", ("Tim", "John"), ["What did Johns's team win?", "Is Tim ok?"])
    path.write_text(json.dumps([first, second]))
    corpus = load(path)
    assert corpus.speakers == {"conv-a": ("Caroline", "Melanie"), "conv-b": ("Tim", "John")}

    other = silence("silence-other", corpus, full(corpus), [])
    assert (other.name, other.holder) == ("silence-other", SILENCES["silence-other"])
    assert [(a.user, a.text, a.source) for a in other.asks] == [
        ("conv-a", "What did Melanie's team win?", "conv-b"),
        ("conv-a", "Is Caroline ok?", "conv-b"),
        ("conv-b", "Where did John go with Tim?", "conv-a"),
    ]
    talk = silence("small-talk", corpus, full(corpus), ["hi", "thanks!"])
    assert [(a.user, a.text) for a in talk.asks] == [
        ("conv-a", "hi"), ("conv-a", "thanks!"), ("conv-b", "hi"), ("conv-b", "thanks!"),
    ]  # fmt: skip

    small = small_users(corpus)
    users = conversation_of(corpus, small)
    drawn = sampled_others(corpus, users, count=20)
    assert drawn == sampled_others(corpus, users, count=20)  # seeded
    assert len(drawn) == 20
    for ask in drawn:
        assert ask.source != users[ask.user]
        theirs = {"conv-a": {"Caroline", "Melanie", "Mel"}, "conv-b": {"Tim", "John", "Johns"}}
        assert not theirs[ask.source] & set(ask.text.replace("'s", " ").rstrip("?").split())
    with pytest.raises(ValueError, match="no silence regime"):
        silence("silence-elsewhere", corpus, full(corpus), [])


def _memory(key: str, score: float | None) -> Any:
    from datetime import UTC, datetime

    from recall.memory import Memory

    return Memory(key, "u", "a", None, None, datetime(2026, 1, 1, tzinfo=UTC), score=score)


def test_the_sweep_cuts_a_threshold_zero_search_by_score() -> None:
    from harness.silence import SWEEP, passing, sweep_mismatches

    found = [_memory("a", 0.9), _memory("b", 0.5), _memory("c", 0.2)]
    assert SWEEP == (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
    assert [m.id for m in passing(found, 0.5)] == ["a", "b"]
    assert passing([_memory("d", None)], 0.1) == []
    assert sweep_mismatches([found[:2], []], [found, found[2:]], 0.5) == 0
    assert sweep_mismatches([found[:1], []], [found, found[2:]], 0.5) == 1


def test_content_words_drop_stop_words_and_meet_at_their_stems() -> None:
    from harness.heldout import content_words, shared_content_words

    assert content_words("I've been learning the cello") == {"learn", "cello"}
    assert shared_content_words("I have been running", "Which runs?") == {"run"}
    assert shared_content_words("she lived there", "living") == {"liv"}
    assert shared_content_words("two cities", "which city") == {"citi"}
    assert shared_content_words("my child", "her childhood") == {"child"}
    assert shared_content_words("I've been learning the cello", "Which instrument?") == set()


def test_the_paraphrase_probe_shares_no_content_word_with_its_facts() -> None:
    from harness.heldout import paraphrase_probe, shared_content_words

    probe = paraphrase_probe()
    facts = [t.fact for t in probe.thread if t.fact is not None]
    assert sorted(facts) == list(range(12))  # each fact told once
    assert 16 <= len(probe.thread) <= 20
    assert sorted(fact for _q, fact in probe.questions) == list(range(12))
    for question, fact in probe.questions:
        turn = probe.fact_turn(fact)
        assert shared_content_words(question, f"{turn.user} {turn.assistant}") == set(), question


def test_small_talk_has_forty_lines_or_more_in_varied_families() -> None:
    from harness.heldout import SMALL_TALK, small_talk

    lines = small_talk()
    families = {line["family"] for line in json.loads(SMALL_TALK.read_text())["lines"]}
    assert len(lines) >= 40 and len(set(lines)) == len(lines)
    assert len(families) >= 10


def test_no_benchmark_reaches_into_the_tests() -> None:
    """Issue 31: a script or the harness imports neither tests/ nor anything through a
    changed `sys.path`; what tests and benchmarks share lives in the harness."""
    wrong = []
    for path in [*SCRIPTS, *sorted((BENCHMARKS / "harness").glob("*.py"))]:
        tree = ast.parse(path.read_text())
        if any(m == "tests" or m.startswith("tests.") for m in _imported_from(tree)):
            wrong.append(f"{path.name} imports tests")
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and node.attr == "path"
                and isinstance(node.value, ast.Name)
                and node.value.id == "sys"
            ):
                wrong.append(f"{path.name}:{node.lineno} uses sys.path")
    assert not wrong, wrong


def _lme_record(qid: str, sessions: dict[str, list[str]], answer: str, evidence: str = "") -> Any:
    from datetime import UTC, datetime

    from harness import longmemeval as lme

    when = datetime(2023, 1, 1, tzinfo=UTC)
    record = lme.Record(qid, "multi-session", f"question {qid}?", when, "answer",
                        frozenset({answer}), evidence=frozenset({evidence} - {""}))  # fmt: skip
    for sid, texts in sessions.items():
        for text in texts:
            record.turns.append({"user_message": text, "ai_response": "ok",
                                 "metadata": {"session": sid}})  # fmt: skip
    return record


def test_near_copy_finds_another_records_evidence_by_session_or_by_a_close_vector() -> None:
    from harness import longmemeval as lme

    texts = ["I adopted a cat named Miso", "I adopted a cat called Miso", "The weather is nice",
             "Recipe for soup", "My car is red"]  # fmt: skip
    rng = np.random.default_rng(0)
    raw = rng.normal(size=(len(texts), 8))
    raw[1] = raw[0] + 0.01  # a near copy of the first
    vecs = raw / np.linalg.norm(raw, axis=1, keepdims=True)
    table = {lme._key(lme.stored_text({"user_message": t, "ai_response": "ok"})): v
             for t, v in zip(texts, vecs, strict=True)}  # fmt: skip
    asked = _lme_record("a", {"s1": [texts[0], texts[2]]}, "s1", evidence=texts[0])
    close = _lme_record("b", {"s7": [texts[1], texts[3]]}, "s7")
    far = _lme_record("c", {"s8": [texts[2], texts[4]]}, "s8")  # the evidence session's other turn
    same = _lme_record("d", {"s1": [texts[3]]}, "s9")
    assert lme.near_copy(asked, close, table)
    assert not lme.near_copy(asked, far, table)
    assert lme.near_copy(asked, same, table)  # the evidence session itself


def test_boosting_ranks_within_each_group_with_groups() -> None:
    from harness import boosting

    rng = np.random.default_rng(1)
    x = rng.normal(size=(400, 3))
    y = np.zeros(400)
    for start in range(0, 400, 20):  # in each query the row with the largest first column
        y[start + int(np.argmax(x[start : start + 20, 0]))] = 1
    model = boosting.fit(x, y, np.ones(400), ("a", "b", "c"), groups=[20] * 20, rounds=30)
    top = [int(np.argmax(model.logits(x[s : s + 20]))) for s in range(0, 400, 20)]
    assert sum(y[s + t] for s, t in zip(range(0, 400, 20), top, strict=True)) >= 18


@pytest.mark.parametrize(
    "day",
    ["2026-06-01", "2026-08-31", "2026-11-28", "2026-11-29", "2027-05-05"],  # Sat, Sun, ...
)
@pytest.mark.parametrize("hour", ["00:05", "06:00", "23:55"])
def test_the_time_probes_memories_are_from_when_their_questions_say(day: str, hour: str) -> None:
    """Issue 44: at any hour, the window each question of benchmarks/time_probe.py names holds
    its memory and no other of its topic, all dated before the moment asked (the days left out
    are those on which a question has two answers, e.g. "last year" in January, when last March
    was last year too)."""
    from harness.run import moment
    from time_probe import DATA, dated

    from recall.search.when import time_window

    asked = moment(f"{day}T{hour}")
    for topic in json.loads(DATA.read_text("utf-8"))["topics"]:
        moments = [dated(m["when"], asked) for m in topic["memories"]]
        assert all(m < asked for m in moments)
        for q in topic["questions"]:
            window = time_window(q["text"], asked)
            assert window is not None, q["text"]
            inside = [i for i, m in enumerate(moments) if window.holds(m)]
            assert inside == [q["memory"]], (q["text"], moments, window)


def test_a_p95_ratio_is_paired_and_its_interval_moves_with_the_questions() -> None:
    """`percentile_ratio` (issue 56): two stores taking the same times have 1.0 and no spread;
    twice the times, 2.0 whatever questions are drawn; a store slower on one question only has
    an interval that holds both what it is with that question and without it."""
    from harness.bootstrap import percentile_ratio

    rng = np.random.default_rng(1)
    theirs = list(rng.uniform(1.0, 3.0, 300))
    questions = [n % 100 for n in range(300)]
    assert percentile_ratio(theirs, theirs, questions) == (1.0, 1.0, 1.0)
    ratio, lo, hi = percentile_ratio([2 * t for t in theirs], theirs, questions)
    assert (round(ratio, 9), round(lo, 9), round(hi, 9)) == (2.0, 2.0, 2.0)
    slow = [t + (30.0 if q == 7 else 0.0) for t, q in zip(theirs, questions, strict=True)]
    ratio, lo, hi = percentile_ratio(slow, theirs, questions)
    assert lo <= 1.0 < ratio <= hi
