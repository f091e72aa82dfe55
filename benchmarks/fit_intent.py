"""Fit the asking model (`recall.search.asking`): does a message ask about the user's own life or
earlier talk? The intent a turn's gate weighs with the match (decision 0039).

    python benchmarks/fit_intent.py [--dump .recall/gate-dump/dump.jsonl] [--no-write]

A logistic regression (balanced classes, C = 0.003) over the message's bge-small query vector
and five words of its own (`WORDS`), standardised and folded back into plain weights.
Positives: the personal messages of benchmarks/data/intent_training.json, gate_training.json's
personal questions and its new users' questions, and the fact questions of the gate dump's fit
users (fact users 1-4, RealMem's Adeleke, Ethan, Kenta and Kim, LoCoMo dev, LongMemEval dev;
LoCoMo's, in the third person about named speakers, weigh 0.25). Negatives: the small talk and
generic requests of intent_training.json and gate_training.json, the fit fact users' small
talk and those RealMem users' turns that need no memory. A text given both labels is left out.
The offset puts at 0 the point where the held-out positives and negatives are misread equally
often (5 folds, grouped by user, conversation or a hash of the text). C, the words and LoCoMo's
weight were chosen by the same grouped folds on the fit part (decision 0039). Nothing of the
reported part is read: the fresh fact users, the other RealMem users, the probes.

Writes the model into the shipped second stage's file (`"asking"`) and docs/benchmarks.md
(section "fit-intent"). Then `python benchmarks/gate_dump.py` and `python
benchmarks/gate_rule.py` choose the rule that weighs it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
from harness.gatedump import DUMP, FIT_REALMEM, load_rows
from harness.heldout import DATA
from harness.report import ROOT, git_revision, machine, publish, table
from harness.run import parser, run
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score

from recall.embeddings.bge import BGE_MODEL_NAME, BgeSmallEmbeddings
from recall.search.asking import AskingModel

C = 0.003
LOCOMO_WEIGHT = 0.25
FOLDS = 5
WORDS = (
    ("first_person", r"\b(i|me|my|mine|myself|i'm|i've|i'd|i'll)\b"),
    ("we_our", r"\b(we|our|ours|us|we've|we're|we'd)\b"),
    ("you_said", r"\byou (said|told|mentioned|suggested|recommended|gave|advised|promised)\b"),
    ("past_ref", r"\b(again|last time|remember|recall|remind|earlier|before|we discussed|"
                 r"we talked|we agreed|we decided|as i (said|mentioned|told)|"
                 r"like i (said|mentioned|told))\b"),
    ("question", r"\?"),
)  # fmt: skip
SHIPPED = ROOT / "src" / "recall" / "search" / "models" / "second_stage"

Sample = tuple[str, int, str]  # text, label, group


def fitted_on(row: dict[str, Any]) -> bool:
    """Whether a dump row is of the part the model is fitted on."""
    dataset = row["dataset"]
    if dataset == "fact":
        return bool(row["split"] == "fit")
    if dataset == "realmem":
        return row["user"] in FIT_REALMEM
    return dataset in ("locomo", "lme") and row["kind"] != "small talk"


def hashed(text: str, name: str) -> str:
    """A group for a hand-written line: one of `FOLDS` by its text's hash."""
    return f"{name}-{int(hashlib.md5(text.encode()).hexdigest(), 16) % FOLDS}"  # noqa: S324


def samples(rows: Sequence[dict[str, Any]]) -> list[Sample]:
    """The labelled texts (the module's docstring), each once."""
    mine = json.loads((DATA / "intent_training.json").read_text("utf-8"))
    gate = json.loads((DATA / "gate_training.json").read_text("utf-8"))
    out: dict[str, tuple[int | None, str]] = {}

    def add(text: str, label: int, group: str) -> None:
        if text in out and out[text][0] != label:
            out[text] = (None, group)  # both labels: left out
        else:
            out.setdefault(text, (label, group))

    for t in mine["personal"]:
        add(t, 1, hashed(t, "mine"))
    for t in [*gate["personal_questions"], *(f["question"] for u in gate["new_users"] for f in u)]:
        add(t, 1, hashed(t, "gate"))
    fit = [r for r in rows if fitted_on(r)]
    for r in fit:
        if r["kind"] == "fact":
            add(r["text"], 1, f"{r['dataset']}:{r['user'].split('-small')[0]}")
    for t in mine["small_talk"]:
        add(t, 0, hashed(t, "mine"))
    for t in gate["small_talk"]:
        add(t, 0, hashed(t, "gate"))
    for r in fit:
        if r["kind"] in ("small talk", "no memory needed"):
            add(r["text"], 0, f"{r['dataset']}:{r['user']}")
    return [(t, label, g) for t, (label, g) in sorted(out.items()) if label is not None]


def words(text: str) -> np.ndarray:
    """The word features of a text."""
    low = text.lower()
    return np.array([1.0 if re.search(p, low) else 0.0 for _n, p in WORDS])


def fit(x: np.ndarray, y: np.ndarray, weight: np.ndarray) -> tuple[np.ndarray, float]:
    """Plain weights and intercept of the standardised logistic regression."""
    mu, sd = x.mean(0), x.std(0) + 1e-9
    model = LogisticRegression(C=C, max_iter=5000, class_weight="balanced")
    model.fit((x - mu) / sd, y, sample_weight=weight)
    w = model.coef_[0] / sd
    return w, float(model.intercept_[0] - (model.coef_[0] * mu / sd).sum())


def folds(groups: Sequence[str]) -> np.ndarray:
    """Each sample's fold: whole groups, the largest first to the emptiest fold."""
    sizes: dict[str, int] = {}
    for g in groups:
        sizes[g] = sizes.get(g, 0) + 1
    load = [0] * FOLDS
    fold_of: dict[str, int] = {}
    for g in sorted(sizes, key=lambda g: (-sizes[g], g)):
        k = int(np.argmin(load))
        fold_of[g] = k
        load[k] += sizes[g]
    return np.array([fold_of[g] for g in groups])


async def main() -> None:
    """Fit, print and write the model and its section."""
    cli = parser(__doc__)
    cli.add_argument("--dump", type=Path, default=DUMP, help=f"the gate dump (default {DUMP})")
    args = cli.parse_args()
    revision = git_revision()
    data = samples(load_rows(args.dump))
    texts = [t for t, _y, _g in data]
    y = np.array([label for _t, label, _g in data])
    groups = [g for _t, _y, g in data]
    embedder = BgeSmallEmbeddings()
    vectors = np.array([await embedder.aembed_query(t) for t in texts], dtype=np.float64)
    x = np.hstack([vectors, np.array([words(t) for t in texts])])
    weight = np.array([LOCOMO_WEIGHT if g.startswith("locomo:") and label == 1 else 1.0
                       for _t, label, g in data])  # fmt: skip
    fold = folds(groups)
    held_out = np.zeros(len(y))
    for k in range(FOLDS):
        w, b = fit(x[fold != k], y[fold != k], weight[fold != k])
        held_out[fold == k] = x[fold == k] @ w + b
    cuts = np.sort(held_out)
    missed = [abs(np.mean(held_out[y == 1] < c) - np.mean(held_out[y == 0] >= c)) for c in cuts]
    offset = -float(cuts[int(np.argmin(missed))])
    auc = float(roc_auc_score(y, held_out))
    w, b = fit(x, y, weight)
    dims = vectors.shape[1]
    model = AskingModel.of(w[:dims], [(n, p, float(v)) for (n, p), v in zip(WORDS, w[dims:],
                           strict=True)], b, offset)  # fmt: skip
    path = SHIPPED / f"{BGE_MODEL_NAME}.json"
    shipped = json.loads(path.read_text("utf-8"))
    shipped["asking"] = model.to_json()
    shipped.setdefault("source", {})["asking"] = "python benchmarks/fit_intent.py"
    if not args.no_write:
        path.write_text(json.dumps(shipped), "utf-8")
    pos, neg = int(y.sum()), int(len(y) - y.sum())
    rows = [["vector and words", f"{C:g}", str(pos), str(neg), f"{auc:.3f}", f"{offset:+.3f}"],
            *[[f"word `{n}`", "", "", "", "", f"{float(v):+.3f}"]
              for (n, _p), v in zip(WORDS, w[dims:], strict=True)]]  # fmt: skip
    body = f"""## The asking model: does a message ask about the user? (decision 0039)

`python benchmarks/fit_intent.py` on {machine()}, commit {revision}, {datetime.now():%Y-%m-%d}.
A logistic regression over the query's bge-small vector and five words of its own, fitted on
the fit part only (module docstring); AUC and the offset from {FOLDS} grouped folds held out;
the last column is the offset, then each word's weight.

{table(["model", "C", "positives", "negatives", "held-out AUC", "offset / weight"], rows)}
"""
    publish("fit-intent", body, write=not args.no_write)


if __name__ == "__main__":
    run(main)
