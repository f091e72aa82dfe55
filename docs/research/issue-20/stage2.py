"""Second stage: build candidate features per regime, fit LR / HGB with leave-one-conversation-out,
report any@k, defaults (limit 3, p >= 0.5), other-session share, echo-first share, calibration.

    venv/bin/python stage2.py [--K 25] [--seeds 0]
"""
from __future__ import annotations

import argparse
import pickle
import time
from pathlib import Path

import numpy as np
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from features import ABS, ALL, COL, LOGN, MINI, RANK, candidates_and_features, neighbour_map
from lib import BM25, Corpus, regime_users

KS = (1, 3, 5, 10)


def build(C, K, seeds, echo_filter=False):
    nb = neighbour_map(C)
    data = {}
    specs = [("full", "full", False, 0), ("full+echo", "full", True, 0), ("pooled", "pooled", False, 0)]
    for s in seeds:
        specs += [(f"small{s}", "small", False, s), (f"small{s}+echo", "small", True, s)]
    for name, reg, echo, seed in specs:
        users = regime_users(C, reg, seed=seed, echo=echo)
        rows = []
        cache = {}
        t0 = time.time()
        for q, ids in zip(C.questions, users):
            ids = np.array(ids)
            key = (q["user"], tuple(ids)) if reg != "small" else None
            if reg in ("full", "pooled") and not echo:
                bm = cache.get(key) or cache.setdefault(key, BM25(C, ids))
            else:
                bm = BM25(C, ids)
            cand, X = candidates_and_features(C, q, ids, bm=bm, K=K, neighbours=nb, echo_filter=echo_filter)
            y = np.array([int(i in q["evidence"]) for i in cand])
            rows.append(dict(q=q, cand=cand, X=X, y=y, n=len(ids)))
        data[name] = rows
        print(f"built {name}: {sum(len(r['cand']) for r in rows)} rows in {time.time()-t0:.1f}s", flush=True)
    return data


def make(kind):
    if kind == "lr":
        return make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=2000))
    if kind == "lr_bal":
        return make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=2000, class_weight="balanced"))
    if kind == "hgb":
        return HistGradientBoostingClassifier(max_iter=300, learning_rate=0.05, max_leaf_nodes=15,
                                              min_samples_leaf=40, l2_regularization=1.0, random_state=0)
    raise ValueError(kind)


def loco_predict(data, train_sets, test_sets, cols, kind):
    """Returns {test_set: list of prob arrays aligned with rows}."""
    convs = sorted({r["q"]["user"] for r in data["full"]})
    out = {t: [None] * len(data[t]) for t in test_sets}
    for c in convs:
        Xtr = np.vstack([r["X"][:, cols] for s in train_sets for r in data[s] if r["q"]["user"] != c])
        ytr = np.concatenate([r["y"] for s in train_sets for r in data[s] if r["q"]["user"] != c])
        m = make(kind).fit(Xtr, ytr)
        for t in test_sets:
            for i, r in enumerate(data[t]):
                if r["q"]["user"] == c:
                    out[t][i] = m.predict_proba(r["X"][:, cols])[:, 1]
    return out


def metrics(C, rows, probs, limit=3, thr=0.5):
    res = {f"any@{k}": [] for k in KS}
    reach, returned, other, echo_first, echo_ret = [], [], [], [], []
    allp, ally = [], []
    for r, p in zip(rows, probs):
        order = np.argsort(-p, kind="stable")
        ranked = r["cand"][order]
        ev = r["q"]["evidence"]
        for k in KS:
            res[f"any@{k}"].append(bool(set(ranked[:k].tolist()) & ev))
        kept = [int(i) for i, pp in zip(ranked[:limit], p[order][:limit]) if pp >= thr]
        reach.append(bool(set(kept) & ev))
        returned.append(len(kept))
        ev_sess = {C.records[i]["session"] for i in ev}
        other.extend(C.records[i]["session"] not in ev_sess for i in kept)
        echo_first.append(C.records[int(ranked[0])]["kind"] == "echo")
        echo_ret.append(any(C.records[i]["kind"] == "echo" for i in kept))
        allp.append(p); ally.append(r["y"])
    out = {k: 100 * np.mean(v) for k, v in res.items()}
    out["reach@3,0.5"] = 100 * np.mean(reach)
    out["returned"] = np.mean(returned)
    out["other-sess%"] = 100 * np.mean(other) if other else 0.0
    out["echo first%"] = 100 * np.mean(echo_first)
    out["echo returned%"] = 100 * np.mean(echo_ret)
    allp, ally = np.concatenate(allp), np.concatenate(ally)
    bins = np.minimum((allp * 10).astype(int), 9)
    ece = sum(abs(allp[bins == b].mean() - ally[bins == b].mean()) * (bins == b).sum() for b in range(10) if (bins == b).any()) / len(allp)
    out["ECE"] = ece
    out["prec p>=0.5"] = 100 * ally[allp >= 0.5].mean() if (allp >= 0.5).any() else float("nan")
    return out, (allp, ally)


def reliability(allp, ally):
    lines = ["| predicted | n | mean predicted | observed relevant |", "|---|---|---|---|"]
    edges = [0, .05, .1, .2, .3, .4, .5, .6, .7, .8, .9, 1.0001]
    for lo, hi in zip(edges[:-1], edges[1:]):
        m = (allp >= lo) & (allp < hi)
        if m.any():
            lines.append(f"| {lo:.2f}-{min(hi,1):.2f} | {m.sum()} | {allp[m].mean():.3f} | {ally[m].mean():.3f} |")
    return "\n".join(lines)


FEATSETS = {
    "abs": ABS,
    "abs+rank": ABS + RANK,
    "abs+rank+mini": ABS + RANK + MINI,
    "base5-like": ["cos_bge", "bm25_rel", "bm25_sat", "rank_bge", "rank_bm25"],
}

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--K", type=int, default=25)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--rebuild", action="store_true")
    args = ap.parse_args()
    C = Corpus()
    path = Path(f"cache/data_K{args.K}_s{'-'.join(map(str, args.seeds))}.pkl")
    if path.exists() and not args.rebuild:
        data = pickle.loads(path.read_bytes())
    else:
        data = build(C, args.K, args.seeds)
        path.write_bytes(pickle.dumps(data))
    s = args.seeds[0]
    tests = ["full", f"small{s}", f"small{s}+echo", "full+echo", "pooled"]
    configs = [
        # name, train sets, featset, learner
        ("base5-like LR (bge)", ["full"], "base5-like", "lr_bal"),
        ("abs LR", ["full"], "abs", "lr"),
        ("abs+rank LR", ["full"], "abs+rank", "lr"),
        ("abs+rank LR balanced", ["full"], "abs+rank", "lr_bal"),
        ("abs HGB", ["full"], "abs", "hgb"),
        ("abs+rank HGB", ["full"], "abs+rank", "hgb"),
        ("abs+rank+mini HGB", ["full"], "abs+rank+mini", "hgb"),
        ("abs+rank LR, train full+small+echo", ["full", f"small{s}", "full+echo", f"small{s}+echo"], "abs+rank", "lr"),
        ("abs HGB, train full+small+echo", ["full", f"small{s}", "full+echo", f"small{s}+echo"], "abs", "hgb"),
        ("abs+rank HGB, train full+small+echo", ["full", f"small{s}", "full+echo", f"small{s}+echo"], "abs+rank", "hgb"),
        ("abs+rank+logN HGB, train full+small+echo", ["full", f"small{s}", "full+echo", f"small{s}+echo"], "abs+rank+logn", "hgb"),
    ]
    FEATSETS["abs+rank+logn"] = ABS + RANK + LOGN
    import sys
    only = set(sys.argv[sys.argv.index("--only") + 1:]) if "--only" in sys.argv else None
    keys = ["any@1", "any@3", "any@5", "any@10", "reach@3,0.5", "returned", "other-sess%", "echo first%", "echo returned%", "prec p>=0.5", "ECE"]
    rel = {}
    for name, tr, fs, kind in configs:
        cols = [COL[f] for f in FEATSETS[fs]]
        t0 = time.time()
        preds = loco_predict(data, tr, tests, cols, kind)
        print(f"\n#### {name}  (features {fs}, {kind}, trained on {'+'.join(tr)}; LOCO, {time.time()-t0:.0f}s)\n")
        print("| regime | " + " | ".join(keys) + " |\n|---|" + "---|" * len(keys))
        for t in tests:
            m, (p, y) = metrics(C, data[t], preds[t])
            rel[(name, t)] = (p, y)
            print(f"| {t} | " + " | ".join(f"{m[k]:.2f}" if k in ("returned", "ECE") else f"{m[k]:.1f}" for k in keys) + " |", flush=True)
    pickle.dump(rel, open(f"cache/rel_K{args.K}.pkl", "wb"))
