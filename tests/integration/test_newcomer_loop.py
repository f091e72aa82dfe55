"""A new user through `recall chat`, as issue 45 tried it: the example graph with its offline
responder (which, like many agents, quotes every memory it is handed), every turn stored by the
writer node with its provenance. Facts and small talk in one thread, then each fact asked in
other words in another, and small talk again: each question gets the turn that told its fact
first, small talk gets nothing (decisions 0038 and 0039)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
from typer.testing import CliRunner

from recall.cli import app
from tests.conftest import Databases, quiet_cli_logging

pytestmark = pytest.mark.model

TOLD = [
    "hi there!",
    "I'm learning Japanese with a tutor every Tuesday",
    "My daughter Mia is allergic to peanuts",
    "thanks, that's helpful",
    "We mostly eat vegetarian at home these days",
    "I'm training for the Berlin marathon in September",
    "what's 17 times 23?",
    "I sold the Panda, I drive a grey Skoda now",
    "I live in Tucson with my partner Sam",
    "good morning!",
    "I work night shifts as a nurse at the county hospital",
    "My favourite band is Radiohead",
]
# each question and the fact it asks about, in words it does not share with it
ASKED = [
    ("What language am I studying?", "I'm learning Japanese with a tutor every Tuesday"),
    ("Which foods should my kid avoid?", "My daughter Mia is allergic to peanuts"),
    ("What race am I preparing for?", "I'm training for the Berlin marathon in September"),
    ("What car do I have?", "I sold the Panda, I drive a grey Skoda now"),
    ("Which city am I in?", "I live in Tucson with my partner Sam"),
    ("What do I do for a living?", "I work night shifts as a nurse at the county hospital"),
    ("Who do I love listening to?", "My favourite band is Radiohead"),
    ("What do we eat at home?", "We mostly eat vegetarian at home these days"),
    ("What car do I have?", "I sold the Panda, I drive a grey Skoda now"),  # asked again
]
SMALL_TALK = ["good morning!", "thanks!", "what's the capital of Peru?"]


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    yield
    structlog.reset_defaults()


@pytest.fixture
async def runner(
    databases: Databases, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> CliRunner:
    monkeypatch.setenv("RECALL_DATABASE_URL", await databases.create("recall_newcomer_loop"))
    monkeypatch.setenv("RECALL_QUEUE_PATH", str(tmp_path / "outbox.sqlite3"))
    monkeypatch.delenv("RECALL_CHAT_MODEL", raising=False)
    quiet_cli_logging(monkeypatch)
    return CliRunner()


def recalled(output: str) -> list[list[str]]:
    """Per message of a `recall chat` session, the user texts of the memories it was handed."""
    turns: list[list[str]] = []
    for line in output.splitlines():
        if line.startswith("you> "):
            turns.append([])
            line = line[len("you> ") :]
        if line.strip().startswith("[memory ") and turns:
            turns[-1].append(line.split("] ", 1)[1])
    return turns


def test_a_newcomer_gets_each_fact_first_and_small_talk_gets_nothing(runner: CliRunner) -> None:
    told = runner.invoke(app, ["chat", "-u", "newcomer", "--thread", "told"],
                         input="\n".join(TOLD) + "\n")  # fmt: skip
    assert told.exit_code == 0, told.output
    messages = [q for q, _fact in ASKED] + SMALL_TALK
    asked = runner.invoke(app, ["chat", "-u", "newcomer", "--thread", "asked"],
                          input="\n".join(messages) + "\n")  # fmt: skip
    assert asked.exit_code == 0, asked.output
    got = recalled(asked.output)[: len(messages)]
    assert len(got) == len(messages), asked.output
    for (question, fact), memories in zip(ASKED, got, strict=False):
        assert memories and memories[0] == fact, (question, memories)
    for text, memories in zip(SMALL_TALK, got[len(ASKED) :], strict=True):
        assert memories == [], (text, memories)
    # nothing the user only greeted or asked with is handed over as a memory
    handed = {m for memories in got for m in memories}
    assert handed <= {fact for _q, fact in ASKED}, handed
