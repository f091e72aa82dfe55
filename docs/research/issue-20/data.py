"""LoCoMo dev as benchmarks/locomo.py builds it: one record per consecutive turn pair
("Speaker: text" both sides, image captions included), evidence dia_ids mapped to pair
indexes. Pure Python, no database."""
from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path

DATA = Path("/work/shared/data/locomo_dev.json")
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
_EVIDENCE = re.compile(r"D\d+:\d+")


def _date(raw):
    try:
        return datetime.strptime(raw.strip(), "%I:%M %p on %d %B, %Y")
    except ValueError:
        return None


def _line(turn):
    text = f"{turn['speaker']}: {turn['text']}"
    if turn.get("blip_caption"):
        text += f" [shares an image: {turn['blip_caption']}]"
    return text


def load(path: Path = DATA):
    records, questions = [], []
    dia_to = {}
    skipped_ev = skipped_q = 0
    for sample in json.loads(path.read_text()):
        user = sample["sample_id"]
        conv = sample["conversation"]
        sessions = sorted(int(k.split("_")[1]) for k in conv if re.fullmatch(r"session_\d+", k))
        for n in sessions:
            turns = conv[f"session_{n}"]
            when = _date(conv.get(f"session_{n}_date_time", ""))
            pairs = [(i, i + 1) for i in range(0, len(turns) - 1, 2)]
            if len(turns) % 2 == 1 and len(turns) > 1:
                pairs.append((len(turns) - 2, len(turns) - 1))
            for pos, (a, b) in enumerate(pairs):
                idx = len(records)
                records.append(dict(
                    user=user, session=n, pos=pos, when=when,
                    user_message=_line(turns[a]), ai_response=_line(turns[b]),
                    speakers=(turns[a]["speaker"], turns[b]["speaker"]),
                    text=f"{_line(turns[a])}\n{_line(turns[b])}", kind="turn",
                ))
                for t in (turns[a], turns[b]):
                    dia_to.setdefault((user, t["dia_id"]), idx)
        for qa in sample["qa"]:
            if qa.get("category") not in CATEGORIES:
                continue
            wanted = set()
            for entry in qa.get("evidence", []):
                ids = _EVIDENCE.findall(entry)
                if not ids:
                    skipped_ev += 1
                for dia in ids:
                    if (user, dia) in dia_to:
                        wanted.add(dia_to[(user, dia)])
                    else:
                        skipped_ev += 1
            if wanted:
                questions.append(dict(user=user, text=qa["question"], category=qa["category"],
                                      evidence=wanted, speakers=(conv["speaker_a"], conv["speaker_b"])))
            else:
                skipped_q += 1
    return records, questions, skipped_ev, skipped_q


if __name__ == "__main__":
    r, q, se, sq = load()
    print(len(r), "records", len(q), "questions", se, "evidence skipped", sq, "questions skipped")
    from collections import Counter
    print(Counter(x["user"] for x in r))
