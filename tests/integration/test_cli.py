"""The `recall` command, run as a user runs it (the real model, a real database)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
from structlog.testing import capture_logs
from typer.testing import CliRunner

from recall.cli import app
from recall.cli.admin import prepare_model
from recall.config import Settings
from recall.search.judging import RULE
from tests.conftest import Databases, quiet_cli_logging

pytestmark = pytest.mark.model


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """The CLI configures structlog for its process; other tests expect the defaults back."""
    yield
    structlog.reset_defaults()


@pytest.fixture(scope="module")
async def cli_url(databases: Databases) -> str:
    return await databases.create("recall_cli")


@pytest.fixture
def runner(cli_url: str, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("RECALL_DATABASE_URL", cli_url)
    quiet_cli_logging(monkeypatch)  # reset after each test
    return CliRunner()


def test_help_on_every_command(runner: CliRunner) -> None:
    commands = ["migrate", "add", "import", "export", "import-notes", "search", "recent", "forget",
                "retention", "stats", "reembed", "chat", "demo"]  # fmt: skip
    for args in [[], *([c] for c in commands), ["db"], ["db", "start"], ["db", "stop"]]:
        result = runner.invoke(app, [*args, "--help"])
        assert result.exit_code == 0, (args, result.output)
        assert "Usage" in result.output


def test_migrate_add_search_recent_forget(runner: CliRunner) -> None:
    assert runner.invoke(app, ["migrate"]).exit_code == 0
    again = runner.invoke(app, ["migrate"])
    assert again.exit_code == 0 and "up to date" in again.output

    added = runner.invoke(app, ["add", "-u", "cli-alice", "I adopted a dog named Max", "Nice!"])
    assert added.exit_code == 0, added.output
    memory_id = added.stdout.strip()

    found = runner.invoke(app, ["search", "-u", "cli-alice", "What is my dog's name?", "--json"])
    assert found.exit_code == 0, found.output
    hits = json.loads(found.stdout)
    assert [h["id"] for h in hits] == [memory_id]
    assert hits[0]["similarity"] >= 0.5

    other = runner.invoke(app, ["search", "-u", "cli-bob", "What is my dog's name?", "--json"])
    assert json.loads(other.stdout) == []

    recent = runner.invoke(app, ["recent", "-u", "cli-alice"])
    assert "I adopted a dog named Max" in recent.output

    stats = runner.invoke(app, ["stats"])
    assert stats.exit_code == 0 and "memories" in stats.output
    assert "users by size" in stats.stdout and "1-10" in stats.stdout
    offline = runner.invoke(app, ["stats", "--server", "http://127.0.0.1:9"])
    assert offline.exit_code == 1 and "cannot read metrics" in offline.output

    refused = runner.invoke(app, ["forget", "-u", "cli-alice"], input="n\n")
    assert refused.exit_code != 0
    erased = runner.invoke(app, ["forget", "-u", "cli-alice", "--yes"])
    assert erased.exit_code == 0 and "erased 1 memory\n" in erased.output


def test_import_jsonl_twice_stores_once(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "turns.jsonl"
    lines = [
        {"user_id": "cli-importer", "user_message": f"imported fact {i}", "ai_response": "ok",
         "conversation_id": "c1", "created_at": f"2024-01-0{i + 1}T10:00:00+00:00",
         "metadata": {"n": i}}
        for i in range(5)
    ]  # fmt: skip
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    first = runner.invoke(app, ["import", str(path), "--batch-size", "2", "--writers", "3"])
    assert first.exit_code == 0, first.output
    assert "imported 5 turns: 5 new, 0 already there, 0 bad lines skipped" in first.output
    again = runner.invoke(app, ["import", str(path)])
    assert again.exit_code == 0
    assert "imported 5 turns: 0 new, 5 already there, 0 bad lines skipped" in again.output
    recent = runner.invoke(app, ["recent", "-u", "cli-importer", "-n", "50", "--json"])
    rows = json.loads(recent.stdout)
    assert len(rows) == 5
    assert rows[0]["user_message"] == "imported fact 4"
    assert rows[0]["metadata"] == {"n": 4, "recall": {"holds": "statement", "rule": RULE}}


def test_import_notes(runner: CliRunner, tmp_path: Path) -> None:
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "2026-02-15.md").write_text("Set up ErsatzTV.\n\nPort 8409.")
    first = runner.invoke(app, ["import-notes", str(tmp_path), "-u", "cli-notes"])
    assert first.exit_code == 0, first.output
    assert "imported 2 paragraphs from 1 file: 2 new, 0 already there" in first.stdout
    found = runner.invoke(
        app, ["search", "-u", "cli-notes", "ErsatzTV", "--mode", "keyword", "--json"]
    )
    assert json.loads(found.stdout)[0]["kind"] == "note"
    empty = runner.invoke(app, ["import-notes", str(tmp_path / "memory"), "-u", "x"])
    assert empty.exit_code == 1


def test_bad_input_exits_non_zero_with_a_message(runner: CliRunner, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"user_id": "x", "user_message": "fine here", "ai_response": "ok"}\nnot json\n')
    result = runner.invoke(app, ["import", str(bad)])
    assert result.exit_code == 1
    assert "bad.jsonl:2: not valid JSON" in result.output
    assert "1 bad line in" in result.output and "nothing imported" in result.output
    empty = runner.invoke(app, ["search", "-u", "someone", "   "])
    assert empty.exit_code == 1 and "query must not be empty" in empty.output
    assert runner.invoke(app, ["search", "-u", "x", "q", "--limit", "0"]).exit_code == 2
    assert runner.invoke(app, ["import", str(bad), "--writers", "0"]).exit_code == 2


def test_embedded_server_start_status_stop(tmp_path: Path) -> None:
    env = {**os.environ, "RECALL_DATA_DIR": str(tmp_path / "pgdata")}
    env.pop("RECALL_DATABASE_URL", None)
    env.pop("DATABASE_URL", None)

    def recall(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "recall", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        return done.stdout

    assert "running:     no" in recall("db", "status")
    assert "embedded PostgreSQL running" in recall("db", "start")
    assert "running:     yes" in recall("db", "status")  # it outlived the `start` process
    # sized for this machine once, at its first start
    assert "shared_buffers" in (tmp_path / "pgdata" / "postgresql.auto.conf").read_text()
    assert "model ready: bge-small-en-v1.5" in recall("db", "start")  # reused, not started twice
    assert recall("db", "stop").strip() == "stopped"
    assert "running:     no" in recall("db", "status")
    assert recall("db", "stop").strip() == "not running"


@pytest.mark.parametrize(
    "args",
    [
        ["search", "-u", "cli-hostile", "&|!:*()'\"\\"],
        ["search", "-u", "cli-hostile", "'; DROP TABLE recall.memories; --", "--mode", "keyword"],
        ["search", "-u", "%", "_", "--mode", "hybrid"],
        ["add", "-u", "cli-hostile", "'; DROP TABLE recall.memories; --", "<script>"],
        ["add", "-u", "x" * 10_240, "hello there", "hi"],
        ["add", "-u", "cli-hostile", "   ", "hi"],
        ["recent", "-u", "   "],
        ["forget", "-u", "", "--yes"],
    ],
)
def test_hostile_cli_input_is_an_answer_or_a_clear_error(
    runner: CliRunner, args: list[str]
) -> None:
    result = runner.invoke(app, args)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert result.exit_code in (0, 1), result.output
    if result.exit_code == 1:
        assert result.stderr.startswith("error: ")
    assert "Traceback" not in result.output


def test_chat_remembers_and_shows_retrieved_memories(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RECALL_QUEUE_PATH", str(tmp_path / "outbox.sqlite3"))
    monkeypatch.delenv("RECALL_CHAT_MODEL", raising=False)
    script = "I adopted a dog named Rex\nWhat is my dog's name?\n/quit\n"
    result = runner.invoke(app, ["chat", "-u", "cli-chat", "--threshold", "0.3"], input=script)
    assert result.exit_code == 0, result.output
    assert result.stdout.count("ai (offline responder)> ") == 2
    assert "[memory" in result.stdout and "I adopted a dog named Rex" in result.stdout


def _hits(runner: CliRunner, *args: str) -> list[dict[str, object]]:
    result = runner.invoke(app, ["search", *args, "--json"])
    assert result.exit_code == 0, result.output
    hits: list[dict[str, object]] = json.loads(result.stdout)
    return hits


def test_search_defaults_come_from_settings(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    for text in ("My dog Max loves the park", "My dog Max chews my shoes", "My dog Max sleeps"):
        assert runner.invoke(app, ["add", "-u", "cli-defaults", text, "ok"]).exit_code == 0
    query = ["-u", "cli-defaults", "my dog Max"]
    assert len(_hits(runner, *query)) == 3
    monkeypatch.setenv("RECALL_MAX_MEMORIES", "1")
    assert len(_hits(runner, *query)) == 1
    assert len(_hits(runner, *query, "--limit", "2")) == 2  # an option wins over the setting
    monkeypatch.delenv("RECALL_MAX_MEMORIES")
    # cosines near 0.65: kept at the default threshold, dropped at the configured one
    monkeypatch.setenv("RECALL_MODE", "semantic")
    assert len(_hits(runner, *query)) == 3
    monkeypatch.setenv("RECALL_SIMILARITY_THRESHOLD", "0.9")
    assert _hits(runner, *query) == []
    assert len(_hits(runner, *query, "--threshold", "0.5")) == 3


def test_search_mode_comes_from_settings(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    turn = ["My neighbour Zebulon fixed the boiler", "Good to know."]
    added = runner.invoke(app, ["add", "-u", "cli-mode", *turn])
    assert added.exit_code == 0, added.output
    query = ["-u", "cli-mode", "Zebulon"]  # one shared word: a cosine near 0.57 (bge-small)
    monkeypatch.setenv("RECALL_SIMILARITY_THRESHOLD", "0.7")  # unused in keyword mode
    monkeypatch.setenv("RECALL_MODE", "semantic")
    assert _hits(runner, *query) == []
    monkeypatch.setenv("RECALL_MODE", "keyword")
    found = _hits(runner, *query)
    assert [h["id"] for h in found] == [added.stdout.strip()]
    assert found[0]["score"] != found[0]["similarity"]  # ranked by BM25, not by the cosine
    assert _hits(runner, *query, "--mode", "semantic") == []  # an option wins over the setting
    wrong = runner.invoke(app, ["search", *query, "--mode", "fuzzy"])
    assert wrong.exit_code == 2 and "semantic, keyword, hybrid" in wrong.output


def test_chat_takes_its_limit_from_settings(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for text in ("My dog Max loves the park", "My dog Max chews my shoes"):
        assert runner.invoke(app, ["add", "-u", "cli-chat-limit", text, "ok"]).exit_code == 0
    monkeypatch.setenv("RECALL_QUEUE_PATH", str(tmp_path / "outbox.sqlite3"))
    monkeypatch.delenv("RECALL_CHAT_MODEL", raising=False)
    monkeypatch.setenv("RECALL_MODE", "semantic")
    script = "What does my dog Max do?\n/quit\n"
    both = runner.invoke(app, ["chat", "-u", "cli-chat-limit"], input=script)
    assert both.exit_code == 0, both.output
    assert both.stdout.count("[memory") == 2
    monkeypatch.setenv("RECALL_MAX_MEMORIES", "1")
    one = runner.invoke(app, ["chat", "-u", "cli-chat-limit"], input=script)
    assert one.exit_code == 0, one.output
    assert one.stdout.count("[memory") == 1


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("RECALL_MAX_MEMORIES", "0", "error: RECALL_MAX_MEMORIES=0 is invalid: must be between"),
        # issue 48: the store refuses more than 1000 at every search; the process must not start
        (
            "RECALL_MAX_MEMORIES",
            "2000",
            "error: RECALL_MAX_MEMORIES=2000 is invalid: must be between 1 and 1000",
        ),
        ("RECALL_HNSW_M", "abc", "error: RECALL_HNSW_M='abc' is invalid: invalid literal"),
        ("RECALL_LOG_LEVEL", "loud", "error: RECALL_LOG_LEVEL='loud' is invalid: must be DEBUG"),
    ],
)
def test_invalid_setting_is_one_line_and_exit_1(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch, name: str, value: str, message: str
) -> None:
    monkeypatch.setenv(name, value)
    for args in (["recent", "-u", "someone"], ["db", "status"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
        assert result.stderr.startswith(message) and result.stderr.count("\n") == 1
        assert result.stdout == ""


def test_invalid_setting_in_a_real_process_has_no_traceback() -> None:
    env = {**os.environ, "RECALL_SIMILARITY_THRESHOLD": "2"}
    done = subprocess.run(
        [sys.executable, "-m", "recall", "db", "status"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr == (
        "error: RECALL_SIMILARITY_THRESHOLD=2.0 is invalid: must be between 0 and 1\n"
    )


def test_log_level_comes_from_settings(runner: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    levels: list[str | None] = []
    monkeypatch.setattr(
        "recall.cli.configure_logging", lambda level=None, **_kwargs: levels.append(level)
    )
    assert runner.invoke(app, ["db", "status"]).exit_code == 0
    monkeypatch.setenv("RECALL_LOG_LEVEL", "debug")
    assert runner.invoke(app, ["db", "status"]).exit_code == 0
    assert levels == ["WARNING", "debug"]


async def test_prepare_model_exports_it_into_the_cache(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "models"
    with capture_logs() as events:
        embeddings = await prepare_model(
            Settings(model_cache_dir=cache, embedding_model="all-MiniLM-L6-v2"), None
        )
    assert capsys.readouterr().out == f"model ready: all-MiniLM-L6-v2 (cache {cache})\n"
    # exported now, not in the first request
    assert "embedding.onnx.exported" in [e["event"] for e in events]
    assert len(list(cache.glob("all-MiniLM-L6-v2-*.onnx"))) == 1
    assert len(embeddings.embed_query("hello")) == 384


def test_db_start_and_migrate_prepare_the_model(runner: CliRunner) -> None:
    started = runner.invoke(app, ["db", "start"])  # RECALL_DATABASE_URL is set: no server
    assert started.exit_code == 0, started.output
    assert started.stdout.splitlines()[0].endswith("nothing to start")
    assert started.stdout.splitlines()[1] == "model ready: bge-small-en-v1.5"
    migrated = runner.invoke(app, ["migrate"])
    assert migrated.exit_code == 0, migrated.output
    assert migrated.stdout.startswith("model ready: bge-small-en-v1.5\n")


def test_db_start_with_migrate_prepares_the_model_once(runner: CliRunner) -> None:
    done = runner.invoke(app, ["db", "start", "--migrate"])  # `make run`'s one step
    assert done.exit_code == 0, done.output
    lines = done.stdout.splitlines()
    assert lines[0].endswith("nothing to start")  # RECALL_DATABASE_URL is set
    assert lines[1] == "model ready: bge-small-en-v1.5"
    assert lines[2:] == ["database is up to date"] or lines[2].startswith("applied migrations")


def test_import_reports_every_bad_line_and_skips_them_on_request(
    runner: CliRunner, tmp_path: Path
) -> None:
    path = tmp_path / "mixed.jsonl"
    good = {"user_id": "cli-mixed", "user_message": "a good line here", "ai_response": "ok"}
    path.write_bytes(
        b"\n".join(
            [
                json.dumps(good).encode(),
                b"not json at all",
                json.dumps({**good, "user_message": ""}).encode(),  # the store would refuse it
                '{"user_id": "cli-mixed", "user_message": "caf\u00e9"}'.encode("latin-1"),
                json.dumps({**good, "user_message": "another good one"}).encode(),
            ]
        )
        + b"\n"
    )
    refused = runner.invoke(app, ["import", str(path)])
    assert refused.exit_code == 1 and "Traceback" not in refused.output
    for line, why in [(2, "not valid JSON"), (3, "user_message must not be empty"),
                      (4, "not UTF-8 text")]:  # fmt: skip
        assert f"mixed.jsonl:{line}: {why}" in refused.output
    assert "3 bad lines" in refused.output and "nothing imported" in refused.output
    nothing = runner.invoke(app, ["recent", "-u", "cli-mixed", "--json"])
    assert json.loads(nothing.stdout) == []

    skipped = runner.invoke(app, ["import", str(path), "--skip-bad"])
    assert skipped.exit_code == 0, skipped.output
    assert "mixed.jsonl:2: not valid JSON" in skipped.output  # still listed
    assert "imported 2 turns: 2 new, 0 already there, 3 bad lines skipped" in skipped.output
    stored = runner.invoke(app, ["recent", "-u", "cli-mixed", "--json"])
    assert {m["user_message"] for m in json.loads(stored.stdout)} == {
        "a good line here",
        "another good one",
    }


def test_without_a_database_a_reading_command_says_so_and_creates_none(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RECALL_")}
    env["XDG_DATA_HOME"] = str(tmp_path / "data")
    for command in (["search", "-u", "alice", "dog"], ["stats"], ["forget", "-u", "a", "--yes"]):
        done = subprocess.run(
            [sys.executable, "-m", "recall", *command],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=120,
        )
        assert done.returncode == 1, done.stderr
        assert done.stderr.strip().splitlines() == [
            f"error: no database in {tmp_path / 'data' / 'recall' / 'pgdata'}: start one with "
            "`recall db start`, or point RECALL_DATA_DIR (or RECALL_DATABASE_URL) at yours"
        ]
    assert list(tmp_path.iterdir()) == []  # no database made, in the data folder or here


def test_version_and_stats_location(runner: CliRunner) -> None:
    from importlib import metadata

    version = runner.invoke(app, ["--version"])
    assert version.exit_code == 0
    assert version.stdout.strip() == f"recall {metadata.version('langgraph-recall')}"
    stats = runner.invoke(app, ["stats"])
    assert stats.stdout.startswith("database: the server of RECALL_DATABASE_URL\n")


def test_stats_shows_each_store_index_breadth_and_recall(runner: CliRunner, cli_url: str) -> None:
    """Issue 47: `recall stats` shows how wide each RecallStore index is searched and the
    recall@10 measured there."""
    from langgraph.store.base import IndexConfig, PutOp

    from recall import RecallStore
    from recall.db.calibration import FLOOR, LADDER
    from tests.integration.test_store_indexes import DIMS, _embed

    async def load() -> None:
        index: IndexConfig = {"dims": DIMS, "embed": _embed, "fields": ["text"]}
        settings = Settings(database_url=cli_url, embedding_cache_ttl=0, store_index_threshold=60)
        async with RecallStore.connect(cli_url, index=index, settings=settings) as store:
            await store.abatch(
                [PutOp(("stats-kb",), f"k{i}", {"text": f"kb {i}"}) for i in range(70)]
            )
            await store.wait_for_index_builds()

    asyncio.run(load())
    shown = runner.invoke(app, ["stats"])
    assert shown.exit_code == 0, shown.output
    lines = shown.stdout.splitlines()
    assert any(line.startswith("RecallStore indexes") for line in lines)
    [row] = [line.split() for line in lines if line.startswith("stats-kb")]
    assert int(row[1]) == DIMS
    assert int(row[3]) in LADDER and float(row[4]) >= FLOOR


def test_demo_uses_its_own_users_and_leaves_nothing(runner: CliRunner) -> None:
    shown = runner.invoke(app, ["demo"])
    assert shown.exit_code == 0, shown.output
    assert "demo-alice asks" in shown.stdout and "demo-bob asks" in shown.stdout
    for user in ("demo-alice", "demo-bob", "alice", "bob"):
        left = runner.invoke(app, ["recent", "-u", user, "--json"])
        assert json.loads(left.stdout) == [], user


def test_search_explain_shows_what_the_gate_keeps_out(runner: CliRunner) -> None:
    for said, reply in (
        ("I've been learning the cello since January", "Lovely!"),
        ("hey there!", "Hi! How can I help?"),
    ):
        assert runner.invoke(app, ["add", "-u", "cli-explain", said, reply]).exit_code == 0
    asked = runner.invoke(app, ["search", "-u", "cli-explain", "Which instrument am I practising?",
                                "--explain"])  # fmt: skip
    assert asked.exit_code == 0, asked.output
    lines = asked.output.splitlines()
    assert lines[0] == "mode hybrid, limit 3, threshold 0.5"
    assert "returned" in lines[1] and "cello" in lines[2]
    # in words, not feature names; the raw parts one flag away
    assert "The gate opened" in asked.output and "In meaning it is" in asked.output
    assert "It was said" in asked.output and "ranker: " not in asked.output
    raw = runner.invoke(app, ["search", "-u", "cli-explain", "Which instrument am I practising?",
                              "--explain-raw"])  # fmt: skip
    assert raw.exit_code == 0, raw.output
    assert "raw ranker: " in raw.output and "The gate opened" in raw.output
    chat = runner.invoke(app, ["search", "-u", "cli-explain", "good morning!", "--explain",
                               "--json"])  # fmt: skip
    rows = json.loads(chat.stdout)
    assert rows and not any(r["passes"] for r in rows)  # shown, each kept out by the gate
    assert all(r["explanation"]["gate"] < 0 for r in rows)
    assert all(any(w.startswith("The gate stayed shut") for w in r["why"]) for r in rows)
    plain = runner.invoke(app, ["search", "-u", "cli-explain", "good morning!", "--json"])
    assert json.loads(plain.stdout) == []


def test_search_explain_labels_what_the_store_returns(runner: CliRunner) -> None:
    """Issue 39: `--explain` re-decided the threshold without keyword mode's rule, so BM25
    results under 0.5, which the store returns, were labelled "kept out"."""
    said = runner.invoke(app, ["add", "-u", "cli-label", "My neighbour Zebulon fixed it", "ok"])
    assert said.exit_code == 0, said.output
    query = ["search", "-u", "cli-label", "Zebulon", "--mode", "keyword"]
    returned = json.loads(runner.invoke(app, [*query, "--json"]).stdout)
    assert [m["id"] for m in returned] == [said.stdout.strip()]
    assert returned[0]["score"] < 0.5  # BM25 of one word in one memory: under the threshold
    explained = runner.invoke(app, [*query, "--explain"])
    assert explained.exit_code == 0, explained.output
    assert "kept out" not in explained.output and "returned" in explained.output
    assert "threshold does not apply in keyword mode" in explained.output
    rows = json.loads(runner.invoke(app, [*query, "--explain", "--json"]).stdout)
    assert [r["passes"] for r in rows] == [True]


def test_search_is_a_search_not_a_turn_of_conversation(runner: CliRunner) -> None:
    """Issue 45: `recall search --user carol sister` found nothing: the gate read the word as
    a message that asks nothing of memory. A search someone types gates on the match alone;
    only the retrieval node also reads the message's intent."""
    for said, reply in (
        ("My sister Maya just moved to Denver for a nursing job", "That's a big move for her!"),
        ("I'm thinking about repainting the kitchen", "A warm white would brighten it."),
        ("hey, how's it going?", "All good here! What's up?"),
    ):
        assert runner.invoke(app, ["add", "-u", "cli-carol", said, reply]).exit_code == 0
    found = json.loads(runner.invoke(app, ["search", "-u", "cli-carol", "sister", "--json"]).stdout)
    assert [m["user_message"] for m in found][:1] == [
        "My sister Maya just moved to Denver for a nursing job"
    ]
    explained = runner.invoke(app, ["search", "-u", "cli-carol", "sister", "--explain"])
    assert "does not read as asking" not in explained.output
