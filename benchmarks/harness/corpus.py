"""The LoCoMo file (dev split): its conversations as turn pairs, and its questions."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from .report import ROOT

LOCOMO = ROOT.parent / "shared" / "data" / "locomo_dev.json"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
_EVIDENCE = re.compile(r"D\d+:\d+")


@dataclass
class Corpus:
    """LoCoMo as `add_turns` items, one per consecutive turn pair of a session (each
    conversation is one user), and its questions of categories 1-4."""

    turns: list[dict[str, Any]] = field(default_factory=list)
    sessions: list[int] = field(default_factory=list)
    """the session number of each turn pair (N of `session_N`)"""
    dia_to_turn: dict[tuple[str, str], int] = field(default_factory=dict)
    questions: list[tuple[str, str, int, set[int]]] = field(default_factory=list)
    """(user, question, category, indexes in `turns` of the evidence's pairs)"""
    speakers: dict[str, tuple[str, str]] = field(default_factory=dict)
    """each conversation's two speakers (speaker_a, speaker_b)"""
    skipped_evidence: int = 0
    skipped_questions: int = 0


def _date(raw: str) -> datetime | None:
    try:
        return datetime.strptime(raw.strip(), "%I:%M %p on %d %B, %Y")
    except ValueError:
        return None


def _line(turn: dict[str, Any]) -> str:
    text = f"{turn['speaker']}: {turn['text']}"
    if turn.get("blip_caption"):
        text += f" [shares an image: {turn['blip_caption']}]"
    return text


def load(path: Path = LOCOMO, conversations: int | None = None) -> Corpus:
    """Turn pairs ("Speaker: text" on both sides, image captions included, dated by their
    session, a minute apart in order) and questions from the LoCoMo file, evidence mapped to
    pair indexes; the first `conversations` conversations only, when given."""
    corpus = Corpus()
    for sample in json.loads(path.read_text())[:conversations]:
        user = sample["sample_id"]
        conv = sample["conversation"]
        corpus.speakers[user] = (conv["speaker_a"], conv["speaker_b"])
        sessions = sorted(int(k.split("_")[1]) for k in conv if re.fullmatch(r"session_\d+", k))
        for n in sessions:
            turns = conv[f"session_{n}"]
            when = _date(conv.get(f"session_{n}_date_time", ""))
            pairs = [(i, i + 1) for i in range(0, len(turns) - 1, 2)]
            if len(turns) % 2 == 1 and len(turns) > 1:  # the odd last turn joins the one before
                pairs.append((len(turns) - 2, len(turns) - 1))
            for position, (a, b) in enumerate(pairs):
                index = len(corpus.turns)
                corpus.turns.append(
                    {
                        "user_id": user,
                        "user_message": _line(turns[a]),
                        "ai_response": _line(turns[b]),
                        "conversation_id": f"{user}-session-{n}",
                        # a minute apart, in order, as turns stored as they happen are
                        "created_at": None if when is None else when + timedelta(minutes=position),
                        "metadata": {"dia_ids": [turns[a]["dia_id"], turns[b]["dia_id"]]},
                    }
                )
                corpus.sessions.append(n)
                for t in (turns[a], turns[b]):
                    corpus.dia_to_turn.setdefault((user, t["dia_id"]), index)
        for qa in sample["qa"]:
            if qa.get("category") not in CATEGORIES:
                continue
            wanted: set[int] = set()
            for entry in qa.get("evidence", []):
                ids = _EVIDENCE.findall(entry)
                if not ids:
                    corpus.skipped_evidence += 1
                for dia in ids:
                    if (user, dia) in corpus.dia_to_turn:
                        wanted.add(corpus.dia_to_turn[(user, dia)])
                    else:
                        corpus.skipped_evidence += 1
            if wanted:
                corpus.questions.append((user, qa["question"], qa["category"], wanted))
            else:
                corpus.skipped_questions += 1
    return corpus


def conversation_pairs(path: Path = LOCOMO) -> list[tuple[str, str]]:
    """The LoCoMo turn pairs as (user_message, ai_response): realistic chat texts (about 300
    characters a pair) for synthetic memories."""
    return [(t["user_message"], t["ai_response"]) for t in load(path).turns]
