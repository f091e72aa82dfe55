"""Focused experiments on the second stage (see REPORT.md):
    venv/bin/python analyze.py --K 25 --seeds 0 1 2 --part compare|tradeoff|echo|sizes
"""
import argparse
import pickle
import time
from pathlib import Path

import numpy as np

from features import ABS, COL, LOGN, MINI, RANK, SIDE
from lib import Corpus
from stage2 import build, loco_predict, metrics, reliability

ap = argparse.ArgumentParser()
ap.add_argument("--K", type=int, default=25)
ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
ap.add_argument("--part", nargs="+", default=["compare"])
ap.add_argument("--rebuild", action="store_true")
ap.add_argument("--model", default="abs+rank:lr")
ap.add_argument("--echo-filter", action="store_true")
ap.add_argument("--configs", nargs="*")
ap.add_argument("--train", default="all")
args = ap.parse_args()
C = Corpus()
path = Path(f"cache/data2_K{args.K}_s{'-'.join(map(str, args.seeds))}{'_ef' if args.echo_filter else ''}.pkl")
if path.exists() and not args.rebuild:
    data = pickle.loads(path.read_bytes())
else:
    data = build(C, args.K, args.seeds, echo_filter=args.echo_filter)
    path.write_bytes(pickle.dumps(data))
S = args.seeds
SMALL = [f"small{s}" for s in S]
SMALLE = [f"small{s}+echo" for s in S]
TRAIN_ALL = {"all": ["full", "full+echo", f"small{S[0]}", f"small{S[0]}+echo"],
             "full+small": ["full", f"small{S[0]}"], "full": ["full"],
             "full+small+pooled": ["full", f"small{S[0]}", "pooled"]}[args.train]
FS = {
    "abs": ABS, "abs+rank": ABS + RANK, "abs+rank+side": ABS + RANK + SIDE,
    "abs+rank+side+mini": ABS + RANK + SIDE + MINI, "abs+side": ABS + SIDE,
    "abs+rank+side+logn": ABS + RANK + SIDE + LOGN,
}
KEYS = ["any@1", "any@3", "any@5", "any@10", "reach@3,0.5", "returned", "other-sess%", "echo first%", "prec p>=0.5", "ECE"]


def avg_metrics(tests, preds):
    ms = [metrics(C, data[t], preds[t])[0] for t in tests]
    return {k: np.mean([m[k] for m in ms]) for k in ms[0]}


def fmt(m):
    return " | ".join(f"{m[k]:.2f}" if k in ("returned", "ECE") else f"{m[k]:.1f}" for k in KEYS)


def header(first):
    return f"| {first} | " + " | ".join(KEYS) + " |\n|---|" + "---|" * len(KEYS)


def groups():
    return [("full", ["full"]), ("small (mean of seeds)", SMALL), ("small+echo", SMALLE),
            ("full+echo", ["full+echo"]), ("pooled (all 5 convs, 1414)", ["pooled"])]


tests = ["full", "full+echo", "pooled"] + SMALL + SMALLE
if "compare" in args.part:
    configs = [tuple(c.split(":")) for c in args.configs] if args.configs else [
        ("abs+rank", "lr"), ("abs+rank", "hgb"),
        ("abs+rank+side", "lr"), ("abs+rank+side", "hgb"),
        ("abs+side", "hgb"), ("abs+rank+side+mini", "hgb"), ("abs+rank+side+logn", "hgb"),
    ]
    for fs, kind in configs:
        t0 = time.time()
        preds = loco_predict(data, TRAIN_ALL, tests, [COL[f] for f in FS[fs]], kind)
        print(f"\n#### {fs} / {kind}, trained on {'+'.join(TRAIN_ALL)} (LOCO, K={args.K}, {time.time()-t0:.0f}s)\n")
        print(header("regime"))
        for g, ts in groups():
            print(f"| {g} | {fmt(avg_metrics(ts, preds))} |", flush=True)

if "tradeoff" in args.part or "sizes" in args.part or "echo" in args.part:
    fs, kind = args.model.split(":")
    cols = [COL[f] for f in FS[fs]]
    preds = loco_predict(data, TRAIN_ALL, tests, cols, kind)

if "tradeoff" in args.part:
    print(f"\n#### threshold trade-off, {fs} / {kind} (limit 3)\n")
    print("| regime | threshold | evidence reaches % | returned (mean) | returned that are evidence % | returned from other sessions % |\n|---|---|---|---|---|---|")
    for g, ts in groups()[:3]:
        for thr in (0.0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5):
            ms = []
            for t in ts:
                m, (p, y) = metrics(C, data[t], preds[t], thr=thr)
                # precision of returned
                hit = tot = 0
                for r, pp in zip(data[t], preds[t]):
                    o = np.argsort(-pp, kind="stable")[:3]
                    keep = o[pp[o] >= thr]
                    hit += r["y"][keep].sum(); tot += len(keep)
                m["precret"] = 100 * hit / max(tot, 1)
                ms.append(m)
            a = {k: np.mean([m[k] for m in ms]) for k in ms[0]}
            print(f"| {g} | {thr} | {a['reach@3,0.5']:.1f} | {a['returned']:.2f} | {a['precret']:.1f} | {a['other-sess%']:.1f} |")

if "sizes" in args.part:
    for g, ts in groups():
        p = np.concatenate([np.concatenate(preds[t]) for t in ts])
        y = np.concatenate([np.concatenate([r["y"] for r in data[t]]) for t in ts])
        print(f"\n#### reliability, {fs} / {kind}, regime {g} (all candidates, held-out conversation)\n")
        print(reliability(p, y))

if "echo" in args.part:
    print("\n#### echo mechanisms (small+echo / full+echo): what ranks first and what reaches the agent\n")
    print("| mechanism | regime | any@1 | any@3 | any@5 | reach@3,0.5 | echo first % | echo returned % |\n|---|---|---|---|---|---|---|---|")
    variants = {
        "none (trained on full only, no echo examples)": (["full"], None),
        "rule: drop candidates whose user text is a question with an uninformative reply and near_dup >= 0.5": (["full"], "rule"),
        "rule: multiply relevance by (1 - near_dup) when echo flag": (["full"], "soft"),
        "augmentation: each training question's own echo added as a negative": (TRAIN_ALL, None),
    }
    for name, (tr, mech) in variants.items():
        pr = loco_predict(data, tr, ["full+echo"] + SMALLE, cols, kind)
        for t in ["full+echo"] + SMALLE:
            for r, p in zip(data[t], pr[t]):
                e = r["X"][:, COL["echo"]] > 0
                nd = r["X"][:, COL["near_dup"]]
                if mech == "rule":
                    p[e & (nd >= 0.5)] = 0.0
                elif mech == "soft":
                    p[e] *= (1 - nd[e])
        for g, ts in [("full+echo", ["full+echo"]), ("small+echo", SMALLE)]:
            a = avg_metrics(ts, pr)
            print(f"| {name} | {g} | {a['any@1']:.1f} | {a['any@3']:.1f} | {a['any@5']:.1f} | {a['reach@3,0.5']:.1f} | {a['echo first%']:.1f} | {a['echo returned%']:.1f} |", flush=True)
