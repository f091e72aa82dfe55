"""Fit the asking model (`recall.search.asking`): does a message ask about the user's own life or
earlier talk? The intent that a turn's gate weighs with the match (decision 0039).

    python benchmarks/fit_intent.py [--dump .recall/gate-dump/dump.jsonl] [--no-write]

Over the message's bge-small query vector and five words of its own (`WORDS`), standardised:
one hidden layer of `HIDDEN` rectified units (scikit-learn's `MLPClassifier`, L2 `ALPHA`, fixed
seed), its standardising folded back into plain weights; the logistic regression of before
(C = `C`) is fitted beside it for comparison. Positives: the personal messages of
benchmarks/data/intent_training.json, gate_training.json's personal questions and its new
users' questions, and the fact questions of the gate dump's fit users (fact users 1-4,
RealMem's Adeleke, Ethan, Kenta and Kim, LoCoMo dev, LongMemEval dev; LoCoMo's, in the third
person about named speakers, weigh 0.25). Negatives: the small talk and generic requests of
intent_training.json and gate_training.json, the fit fact users' small talk and those RealMem
users' turns that need no memory. A text given both labels is left out. Classes weigh the same.
The offset puts at 0 the point where the held-out positives and negatives are misread equally
often (5 folds, grouped by user, conversation or a hash of the text). The model, C, the words
and LoCoMo's weight were chosen by the same grouped folds on the fit part (decision 0039; the
hidden layer and its size in decision 0040). Nothing of the reported part is read: the fresh
fact users, the other RealMem users, the probes.

Writes the model into the shipped second stage's file (`"asking"`), each fitted text's held-out
intent (offset included) to .recall/gate-dump/intent-held-out.json, which
benchmarks/gate_rule.py chooses a rule by, and docs/benchmarks.md (section "fit-intent"). Then
`python benchmarks/gate_dump.py` and `python benchmarks/gate_rule.py` choose the rule that
weighs it.
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
from harness.gatedump import DUMP, FIT_REALMEM, HELD_OUT, load_rows
from harness.heldout import DATA
from harness.report import ROOT, git_revision, machine, publish, table
from harness.run import parser, run
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.neural_network import MLPClassifier

from recall.embeddings.bge import BGE_MODEL_NAME, BgeSmallEmbeddings
from recall.search.asking import AskingModel

C = 0.003  # the logistic regression's, fitted for comparison
HIDDEN = 32  # the shipped model's hidden units
ALPHA = 1.0  # and their L2 penalty
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


Fitted = tuple[np.ndarray, float, tuple[np.ndarray, np.ndarray] | None]  # weights, intercept, layer


def fit_linear(x: np.ndarray, y: np.ndarray, weight: np.ndarray) -> Fitted:
    """Plain weights and intercept of the standardised logistic regression."""
    mu, sd = x.mean(0), x.std(0) + 1e-9
    model = LogisticRegression(C=C, max_iter=5000, class_weight="balanced")
    model.fit((x - mu) / sd, y, sample_weight=weight)
    w = model.coef_[0] / sd
    return w, float(model.intercept_[0] - (model.coef_[0] * mu / sd).sum()), None


def fit_hidden(x: np.ndarray, y: np.ndarray, weight: np.ndarray) -> Fitted:
    """The output weights and intercept, and the hidden layer in plain weights, of the
    standardised network; the classes weigh the same."""
    mu, sd = x.mean(0), x.std(0) + 1e-9
    balance = np.where(y == 1, len(y) / (2.0 * y.sum()), len(y) / (2.0 * (len(y) - y.sum())))
    model = MLPClassifier(hidden_layer_sizes=(HIDDEN,), alpha=ALPHA, max_iter=300, random_state=0)
    model.fit((x - mu) / sd, y, sample_weight=weight * balance)
    layer = model.coefs_[0] / sd[:, None]
    biases = model.intercepts_[0] - (mu / sd) @ model.coefs_[0]
    return model.coefs_[1][:, 0], float(model.intercepts_[1][0]), (layer, biases)


def logits(fitted: Fitted, x: np.ndarray) -> np.ndarray:
    """The fitted model's logits for the rows of `x` (vector, then words)."""
    w, b, hidden = fitted
    inputs = x if hidden is None else np.maximum(x @ hidden[0] + hidden[1], 0.0)
    out: np.ndarray = inputs @ w + b
    return out


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

    def held_out_of(fitter: Any) -> np.ndarray:
        out = np.zeros(len(y))
        for k in range(FOLDS):
            out[fold == k] = logits(fitter(x[fold != k], y[fold != k], weight[fold != k]),
                                    x[fold == k])  # fmt: skip
        return out

    def offset_of(held_out: np.ndarray) -> float:
        cuts = np.sort(held_out)
        missed = [abs(np.mean(held_out[y == 1] < c) - np.mean(held_out[y == 0] >= c))
                  for c in cuts]  # fmt: skip
        return -float(cuts[int(np.argmin(missed))])

    linear = held_out_of(fit_linear)
    held_out = held_out_of(fit_hidden)
    offset = offset_of(held_out)
    w, b, hidden = fit_hidden(x, y, weight)
    dims = vectors.shape[1]
    model = AskingModel.of(w, [(n, p, 0.0) for n, p in WORDS], b, offset, hidden)
    path = SHIPPED / f"{BGE_MODEL_NAME}.json"
    shipped = json.loads(path.read_text("utf-8"))
    shipped["asking"] = model.to_json()
    shipped.setdefault("source", {})["asking"] = "python benchmarks/fit_intent.py"
    if not args.no_write:
        path.write_text(json.dumps(shipped), "utf-8")
        HELD_OUT.parent.mkdir(parents=True, exist_ok=True)
        HELD_OUT.write_text(json.dumps(dict(zip(texts, (held_out + offset).tolist(),
                                                strict=True))), "utf-8")  # fmt: skip
    pos, neg = int(y.sum()), int(len(y) - y.sum())
    wl, _bl, _none = fit_linear(x, y, weight)
    rows = [[f"hidden layer of {HIDDEN} (shipped)", f"alpha {ALPHA:g}", str(pos), str(neg),
             f"{roc_auc_score(y, held_out):.3f}", f"{offset:+.3f}"],
            ["logistic regression", f"C {C:g}", str(pos), str(neg),
             f"{roc_auc_score(y, linear):.3f}", f"{offset_of(linear):+.3f}"],
            *[[f"word `{n}` (regression)", "", "", "", "", f"{float(v):+.3f}"]
              for (n, _p), v in zip(WORDS, wl[dims:], strict=True)]]  # fmt: skip
    body = f"""## The asking model: does a message ask about the user? (decisions 0039, 0040)

`python benchmarks/fit_intent.py` on {machine()}, commit {revision}, {datetime.now():%Y-%m-%d}.
One hidden layer of {HIDDEN} rectified units over the query's bge-small vector and five words of
its own, and the logistic regression of before beside it, fitted on the fit part only (module
docstring); AUC and the offset from {FOLDS} grouped folds held out; the last column is the
offset, then (the regression's) each word's weight.

{table(["model", "penalty", "positives", "negatives", "held-out AUC", "offset / weight"], rows)}
"""
    publish("fit-intent", body, write=not args.no_write)


if __name__ == "__main__":
    run(main)
