"""Issue 45's gate rule: how a turn's gate weighs the gate model's `match` with the intent,
chosen on a fit part of the data and reported on a measure part (decision 0039).

    python benchmarks/gate_rule.py [--dump .recall/gate-dump/dump.jsonl] [--no-write]

Reads the rows of `python benchmarks/gate_dump.py`: every message of the fact users, the
paraphrase probe, the restatement probe's control user, RealMem, LoCoMo dev and LongMemEval dev,
asked once at threshold 0 (limit 10, explained), with the gate's `match` and `intent` (offsets
included) and the top 10's ranker logits and evidence. A rule opens the gate or not from the two
numbers alone, so every rule is scored on the same searches: an open gate returns the top 3 (an
open gate hands over the first `limit` candidates, `SecondStage.score_of`), a shut one nothing.
The dump's `intent` is what a turn's gate reads, the asking model's logit (`recall.search.asking`).
On the fit part, the asking model was fitted on many of the messages: there each message's
intent is the one from the fold of `python benchmarks/fit_intent.py` that did not see it
(.recall/gate-dump/intent-held-out.json), so that a rule is not chosen on intents the model
learnt by heart (decision 0040).
"0024's form" is the verdict before decision 0039 with that intent, `min(match, intent)` with
the scores falling by the slope (0.5) below the best, so that only the candidates within reach
of the best pass 0.5.

The parts (nothing of the measure part is read to choose):
- fit: the `fit` fact users and the `measure` ones (they decided between rules when the first
  rule was chosen, so they are spent as evidence: harness/factusers.py), four RealMem users
  (Adeleke, Ethan, Kenta, Kim), LoCoMo dev's questions and never-said questions, LongMemEval
  dev;
- measure: the `fresh` fact users (written after that choice), the other four RealMem users,
  the paraphrase probe and its 65 small-talk lines (asked of LoCoMo's users too), the
  restatement probe's control user.

The rule family: open when `match + a * intent >= b`, for a in `WEIGHTS` and b in `BIASES`. The
choice: among the rules whose every fit cost (below) of 20 questions or more is at least
`-COST` points, the one with the most fit small talk silent, then the most "no memory needed"
messages silent, then the most never-said questions silent. The store's verdict is then
`(match + a * intent - b) / (1 + a)`, open at 0 (`SecondStage.verdict`).

Measured, per data set and size stratum of the user asked (under 50, 50-500, over 500
memories): a fact question's cost, what the rule's top 3 hold of its evidence minus what the
top 3 with the gate always open hold (points, paired), its reach (evidence returned) and
first (the first returned is evidence); for the other messages the share silent. Bootstrap 95%
intervals in two stages (users drawn, then each drawn user's messages: harness/bootstrap.py).
Writes docs/benchmarks.md (section "gate-rule").
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from harness.bootstrap import shown
from harness.gatedump import DUMP, FIT_REALMEM, HELD_OUT, load_rows
from harness.report import git_revision, machine, publish, table
from harness.run import parser, run

Row = dict[str, Any]
Rule = Callable[[float, float], bool]

LIMIT = 3
SLOPE = 0.5  # the slope of 0024's form
COST = 1.0  # the most a fit group may lose, in points of top-3 evidence
WEIGHTS = (0.0, 0.5, 1.0, 2.0, 3.0, 4.0, 6.0)
BIASES = (-3.0, -2.0, -1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0)
SILENT_KINDS = ("small talk", "no memory needed", "never said")


def part(row: Row) -> str:
    """'fit' or 'measure' (the module's docstring)."""
    dataset = row["dataset"]
    if dataset == "fact":  # users 5-8 chose a rule before (decision 0039): spent, now fit
        return "measure" if row["split"] == "fresh" else "fit"
    if dataset == "realmem":
        return "fit" if row["user"] in FIT_REALMEM else "measure"
    if dataset == "locomo":
        return "measure" if row["kind"] == "small talk" else "fit"
    if dataset == "lme":
        return "fit"
    return "measure"


def held_out(rows: Sequence[Row], path: Path = HELD_OUT) -> list[Row]:
    """`rows` with each fit message's intent from the fold that did not see it, where the
    asking model was fitted on it (the module's docstring)."""
    if not path.exists():
        raise SystemExit(f"{path} is missing: run python benchmarks/fit_intent.py first")
    held = json.loads(path.read_text("utf-8"))
    return [{**r, "intent": held[r["text"]]} if part(r) == "fit" and r["text"] in held
            else r for r in rows]  # fmt: skip


def stratum(size: int) -> str:
    """The user's size stratum."""
    return "under 50" if size < 50 else ("50-500" if size <= 500 else "over 500")


def evidence_in(top: Sequence[Row]) -> bool:
    """Whether any of `top` is evidence."""
    return any(t["evidence"] for t in top)


def today(row: Row) -> list[Row]:
    """What the verdict before decision 0039 returned: the top 3 while
    `sigmoid(min(match, intent) + slope * (z - z_best))` stays at or over 0.5."""
    top = row["top"][:LIMIT]
    if not top:
        return []
    gate, best = min(row["match"], row["intent"]), top[0]["logit"]
    out = []
    for t in top:
        if gate + SLOPE * (t["logit"] - best) < 0:
            break
        out.append(t)
    return out


def by_rule(rule: Rule) -> Callable[[Row], list[Row]]:
    """What a rule returns: the top 3 when it opens, else nothing."""
    return lambda row: row["top"][:LIMIT] if rule(row["match"], row["intent"]) else []


def blend(weight: float, bias: float) -> Rule:
    """Open when `match + weight * intent >= bias`."""
    return lambda match, intent: match + weight * intent >= bias


def label(row: Row) -> str:
    """The data set a row reports under (LoCoMo by regime)."""
    if row["dataset"] == "locomo":
        return f"locomo {row['split']}"
    return str(row["dataset"])


def cost_groups(rows: Sequence[Row], verdict: Callable[[Row], list[Row]]) -> dict[str, list[float]]:
    """Per data set and stratum, each fact question's cost in points."""
    out: dict[str, list[float]] = {}
    for r in rows:
        if r["kind"] != "fact":
            continue
        lost = float(evidence_in(verdict(r))) - float(evidence_in(r["top"][:LIMIT]))
        out.setdefault(f"{label(r)}, {stratum(r['size'])}", []).append(100.0 * lost)
    return out


def silent(rows: Sequence[Row], verdict: Callable[[Row], list[Row]], kind: str) -> float:
    """The share (%) of `kind` messages silent."""
    mine = [r for r in rows if r["kind"] == kind]
    return 100.0 * sum(not verdict(r) for r in mine) / len(mine) if mine else math.nan


def choose(fit: Sequence[Row]) -> tuple[float, float]:
    """The rule of the module's docstring, from the fit part alone."""
    best: tuple[tuple[float, ...], tuple[float, float]] | None = None
    for weight, bias in itertools.product(WEIGHTS, BIASES):
        verdict = by_rule(blend(weight, bias))
        costs = cost_groups(fit, verdict)
        if min(sum(v) / len(v) for v in costs.values() if len(v) >= 20) < -COST:
            continue
        key = tuple(0.0 if math.isnan(v) else v for v in (silent(fit, verdict, k)
                                                           for k in SILENT_KINDS))  # fmt: skip
        if best is None or key > best[0]:
            best = (key, (weight, bias))
    if best is None:
        raise SystemExit(f"no rule keeps every fit group within {COST} points")
    return best[1]


def measured(rows: Sequence[Row], verdict: Callable[[Row], list[Row]]) -> list[list[str]]:
    """One line per data set and stratum (fact questions) and per data set and kind (the
    others), with intervals over users."""
    lines: list[list[str]] = []
    sets = sorted({label(r) for r in rows})
    for name in sets:
        mine = [r for r in rows if label(r) == name]
        facts = [r for r in mine if r["kind"] == "fact"]
        for level in sorted({stratum(r["size"]) for r in facts}):
            sel = [r for r in facts if stratum(r["size"]) == level]
            users = [r["user"] for r in sel]
            got = [verdict(r) for r in sel]
            cost = [float(evidence_in(g)) - float(evidence_in(r["top"][:LIMIT]))
                    for g, r in zip(got, sel, strict=True)]  # fmt: skip
            reach = [float(evidence_in(g)) for g in got]
            first = [float(bool(g) and g[0]["evidence"]) for g in got]
            lines.append([name, f"fact questions, {level}", str(len(sel)),
                          shown(cost, users, within=True), shown(reach, users, within=True),
                          shown(first, users, within=True)])  # fmt: skip
        for kind in SILENT_KINDS:
            sel = [r for r in mine if r["kind"] == kind]
            if sel:
                quiet = [float(not verdict(r)) for r in sel]
                lines.append([name, f"{kind}: silent", str(len(sel)), "", "",
                              shown(quiet, [r["user"] for r in sel], within=True)])  # fmt: skip
    return lines


FAMILIES = {
    "fact users": ("fact",),
    "RealMem": ("realmem",),
    "LoCoMo and LongMemEval": ("locomo", "lme"),
}


def crossed(rows: Sequence[Row]) -> list[list[str]]:
    """Fit on two, score on the third: per family of data sets, the rule chosen on the fit
    part of the others, and what it does on every message of this one."""
    lines: list[list[str]] = []
    for name, sets in FAMILIES.items():
        others = [r for r in rows if part(r) == "fit" and r["dataset"] not in sets]
        weight, bias = choose(others)
        mine = [r for r in rows if r["dataset"] in sets]
        rule = f"match + {weight:g} * intent >= {bias:g}"
        lines += [[name, rule, *line] for line in measured(mine, by_rule(blend(weight, bias)))]
    return lines


async def main() -> None:
    """Choose the rule on the fit part, print and write both parts' figures."""
    cli = parser(__doc__)
    cli.add_argument("--dump", type=Path, default=DUMP, help=f"the dump (default {DUMP})")
    args = cli.parse_args()
    revision = git_revision()
    rows = held_out(load_rows(args.dump))
    fit = [r for r in rows if part(r) == "fit"]
    report = [r for r in rows if part(r) == "measure"]
    weight, bias = choose(fit)
    verdicts = {
        "0024's form: min(match, intent), slope": today,
        f"chosen: match + {weight:g} * intent >= {bias:g}": by_rule(blend(weight, bias)),
        "intent alone >= 0": by_rule(lambda _m, i: i >= 0),
    }
    headers = ["verdict", "data set", "messages", "n", "cost (points)", "reach %",
               "first % / silent %"]  # fmt: skip
    sections = []
    for title, sel in (("measure", report), ("fit", fit)):
        lines = [[name, *line] for name, verdict in verdicts.items()
                 for line in measured(sel, verdict)]  # fmt: skip
        sections.append(f"The {title} part:\n\n{table(headers, lines)}")
    sign = "-" if bias >= 0 else "+"
    shipped = f"(match + {weight:g} * intent {sign} {abs(bias):g}) / {1 + weight:g}"
    body = f"""## The gate's rule: match and intent weighed (issue 45)

`python benchmarks/gate_rule.py` on {machine()}, commit {revision},
{datetime.now():%Y-%m-%d}, from `python benchmarks/gate_dump.py`'s {len(rows)} messages. The
rule chosen on the fit part, its intents held out (every fit group's cost at least -{COST:g}
points; then the most small talk silent): open when `match + {weight:g} * intent >= {bias:g}`,
shipped as the gate `{shipped}` (decisions 0039, 0040). Cost: a fact
question's top-3 evidence under the verdict minus with the gate always open (points, paired;
target: at least -2 in every stratum); reach: evidence returned; first: the first returned is
evidence (for fact questions; for the other messages the column is the share silent). Bootstrap
95% intervals over users, then messages.

{sections[0]}

{sections[1]}

Across data sets (fit on two, score on the third): the rule chosen the same way on the fit part
of the two other families, and what it does on every message of the third (both parts):

{table(["scored on", "rule (chosen without it)", *headers[1:]], crossed(rows))}
"""
    publish("gate-rule", body, write=not args.no_write)


if __name__ == "__main__":
    run(main)
