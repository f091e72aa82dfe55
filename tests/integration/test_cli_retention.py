"""`recall export`, `recall import` of what it wrote, `recall forget --before/--memory` and
`recall retention`, run as a user runs them (the real model, a real database of their own)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
import structlog
from typer.testing import CliRunner

from recall.cli import app
from recall.search.judging import RULE
from tests.conftest import Databases, quiet_cli_logging

pytestmark = pytest.mark.model

SEED: list[dict[str, Any]] = [
    {"user_id": "cli-ann", "user_message": "I adopted a dog named Max", "ai_response": "Nice!",
     "conversation_id": "t1", "created_at": "2024-03-01T09:30:00.123456+02:00",
     "metadata": {"mood": "happy", "tags": ["dog", "é"]}},
    {"user_id": "cli-ann", "user_message": "My sister lives in Lyon", "ai_response": "Noted.",
     "conversation_id": "t2", "created_at": "2025-01-15T00:00:00+00:00"},
    {"user_id": "cli-ann", "user_message": "Ann keeps bees", "ai_response": "", "kind": "note",
     "created_at": "2025-06-01T12:00:00+00:00", "metadata": {"source": "MEMORY.md"}},
    {"user_id": "cli-bob", "user_message": "Bob's own memory", "ai_response": "ok",
     "created_at": "2024-01-01T00:00:00+00:00"},
]  # fmt: skip


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """The CLI configures structlog for its process; other tests expect the defaults back."""
    yield
    structlog.reset_defaults()


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    """As in test_cli.py: the CLI's logging effect (warnings and errors) without caching."""
    quiet_cli_logging(monkeypatch)
    return CliRunner()


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return path


def _read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()]


def _ok(runner: CliRunner, *args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture
async def url(databases: Databases) -> str:
    """A database of the test's own (retention works across every user of a database)."""
    return await databases.create("recall_cli_export")


@pytest.fixture
async def empty_url(databases: Databases) -> str:
    """A second database, left empty for an import."""
    return await databases.create("recall_cli_import")


def _seeded(url: str, runner: CliRunner, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RECALL_DATABASE_URL", url)
    _ok(runner, "import", str(_write(tmp_path / "seed.jsonl", SEED)))


def test_export_then_import_into_an_empty_database_gives_the_same_memories(
    url: str, empty_url: str, runner: CliRunner, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _seeded(url, runner, monkeypatch, tmp_path)
    exported = tmp_path / "ann.jsonl"
    said = _ok(runner, "export", "-u", "cli-ann", "-o", str(exported))
    assert "exported 3 memories of 'cli-ann'" in said
    assert not (tmp_path / "ann.jsonl.partial").exists()
    lines = _read(exported)
    assert [line["user_message"] for line in lines] == [
        "Ann keeps bees", "My sister lives in Lyon", "I adopted a dog named Max"
    ]  # fmt: skip
    # each field as it went in (the time as the same instant)
    by_text = {line["user_message"]: line for line in lines}
    for seed in SEED[:3]:
        line = by_text[seed["user_message"]]
        assert line["ai_response"] == seed["ai_response"]
        assert line["conversation_id"] == seed.get("conversation_id")
        # the library's judgement of each turn (decision 0049) travels with its metadata
        judged = {"recall": {"holds": "statement", "rule": RULE}}
        assert line["metadata"] == {**seed.get("metadata", {}), **judged}
        assert line["kind"] == seed.get("kind", "turn")
        assert _instant(line["created_at"]) == _instant(seed["created_at"])

    monkeypatch.setenv("RECALL_DATABASE_URL", empty_url)
    said = _ok(runner, "import", str(exported))
    assert "imported 3 turns: 3 new, 0 already there" in said
    again = tmp_path / "again.jsonl"
    _ok(runner, "export", "-u", "cli-ann", "-o", str(again))
    assert _read(again) == lines  # ids, texts, times, metadata, conversations, kinds
    # to standard output, the same lines; another user's memories are not in them
    out = runner.invoke(app, ["export", "-u", "cli-ann"])
    assert out.exit_code == 0, out.output
    assert [json.loads(x) for x in out.stdout.splitlines()] == lines
    assert _ok(runner, "import", str(exported)).count("0 new, 3 already there") == 1
    _ok(runner, "export", "-u", "cli-ann", "-o", str(again))  # after the second import
    assert _read(again) == lines


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text)


def test_an_import_line_with_a_bad_id_is_a_bad_line(
    url: str, runner: CliRunner, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("RECALL_DATABASE_URL", url)
    bad = _write(tmp_path / "bad.jsonl", [{**SEED[0], "id": "not-an-id"}, SEED[1]])
    result = runner.invoke(app, ["import", str(bad)])
    assert result.exit_code == 1
    assert ":1: id must be a memory id" in result.output and "nothing imported" in result.output


def test_an_import_line_with_an_id_is_bad_twice_or_too_long_to_keep_whole(
    url: str, runner: CliRunner, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Both would change what the id holds, or fail a batch mid-import: found before any."""
    monkeypatch.setenv("RECALL_DATABASE_URL", url)
    one, two = str(uuid4()), str(uuid4())
    bad = _write(
        tmp_path / "bad.jsonl",
        [
            {**SEED[0], "id": one},
            {**SEED[1], "id": two},
            {**SEED[2], "id": one.upper()},  # the same id, another text
            {**SEED[3], "id": one},  # another user's: fine
            {**SEED[2], "id": str(uuid4()), "user_message": "x" * 2001},
            {**SEED[2], "id": str(uuid4()), "user_message": "x" * 4000, "kind": "summary"},
        ],
    )
    result = runner.invoke(app, ["import", str(bad)])
    assert result.exit_code == 1, result.output
    assert f":3: id {one} of user 'cli-ann' is on line 1 already" in result.output
    assert ":5: user_message is 2,001 characters, over the 2,000" in result.output
    assert "2 bad lines" in result.output and "nothing imported" in result.output
    said = _ok(runner, "import", "--skip-bad", str(bad))
    assert "imported 4 turns: 4 new, 0 already there, 2 bad lines skipped" in said


def test_forget_before_a_date_and_one_memory(
    url: str, runner: CliRunner, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _seeded(url, runner, monkeypatch, tmp_path)
    everything = tmp_path / "before.jsonl"
    _ok(runner, "export", "-u", "cli-ann", "-o", str(everything))
    ids = {line["user_message"]: line["id"] for line in _read(everything)}
    [bob] = [
        json.loads(x) for x in runner.invoke(app, ["export", "-u", "cli-bob"]).stdout.splitlines()
    ]

    def still(user: str) -> set[str]:
        out = runner.invoke(app, ["export", "-u", user])
        return {json.loads(x)["user_message"] for x in out.stdout.splitlines()}

    # bad input: a clear error, exit 1, and nothing erased
    for args, message in [
        (["--before", "last tuesday"], "--before 'last tuesday' is not a date"),
        (["--before", "2024-13-01"], "is not a date"),
        (["--memory", "123"], "'123' is not a memory id"),
        (["--memory", ids["Ann keeps bees"].replace(ids["Ann keeps bees"][:8], "00000000")],
         "has no memory"),
        (["--memory", ids["Ann keeps bees"], "--before", "2025-01-01"], "not both"),
    ]:  # fmt: skip
        result = runner.invoke(app, ["forget", "-u", "cli-ann", *args, "--yes"])
        assert result.exit_code == 1 and message in result.output, (args, result.output)
    other = runner.invoke(app, ["forget", "-u", "cli-ann", "--memory", bob["id"], "--yes"])
    assert other.exit_code == 1 and "'cli-ann' has no memory" in other.output
    assert len(still("cli-ann")) == 3 and still("cli-bob") == {"Bob's own memory"}

    refused = runner.invoke(app, ["forget", "-u", "cli-ann", "--before", "2025-01-01"], input="n\n")
    assert refused.exit_code == 1 and len(still("cli-ann")) == 3
    said = _ok(runner, "forget", "-u", "cli-ann", "--before", "2025-01-01", "--yes")
    assert "erased 1 memory dated before 2025-01-01T00:00:00+00:00" in said
    assert still("cli-ann") == {"My sister lives in Lyon", "Ann keeps bees"}
    assert still("cli-bob") == {"Bob's own memory"}  # older, but another user's

    said = _ok(runner, "forget", "-u", "cli-ann", "--memory", ids["Ann keeps bees"], "--yes")
    assert "erased 1 memory" in said
    assert still("cli-ann") == {"My sister lives in Lyon"}
    gone = runner.invoke(
        app, ["forget", "-u", "cli-ann", "--memory", ids["Ann keeps bees"], "--yes"]
    )
    assert gone.exit_code == 1 and "has no memory" in gone.output


def test_retention_command_uses_the_settings_and_says_what_it_removed(
    url: str, runner: CliRunner, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _seeded(url, runner, monkeypatch, tmp_path)
    said = _ok(runner, "retention")
    assert "no retention set" in said and "nothing removed" in said
    monkeypatch.setenv("RECALL_RETENTION_MAX_PER_USER", "2")
    said = _ok(runner, "retention")
    # ann has 3: her oldest goes; bob has 1
    assert "removed 1 memory (1 over 2 per user) from 1 user" in said
    kept = runner.invoke(app, ["export", "-u", "cli-ann"]).stdout.splitlines()
    assert {json.loads(x)["user_message"] for x in kept} == {
        "My sister lives in Lyon", "Ann keeps bees"
    }  # fmt: skip
    # every seeded memory is over a year old on any day this test runs after mid-2026
    said = _ok(runner, "retention", "--days", "365")
    assert "removed 3 memories (3 older than 365 days, 0 over 2 per user) from 2 users" in said
    for days in ("0", "36501"):  # past a century, the cutoff would be no date
        bad = runner.invoke(app, ["retention", "--days", days])
        assert bad.exit_code == 2, (days, bad.output)
    monkeypatch.setenv("RECALL_RETENTION_DAYS", "-1")
    result = runner.invoke(app, ["retention"])
    assert result.exit_code == 1 and "RECALL_RETENTION_DAYS=-1 is invalid" in result.output
