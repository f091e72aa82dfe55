"""Ablations, paired bootstrap vs today's fusion, the shipped weights (JSON), and the per-query
cost of the second stage.
    venv/bin/python ship.py
"""
import json
import pickle
import time

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

import lib
from features import ABS, COL, RANK, candidates_and_features, neighbour_map
from fusion_today import today_fusion
from lib import BM25, Corpus, regime_users
from stage2 import loco_predict, metrics

C = Corpus()
data = pickle.loads(open("cache/data2_K25_s0-1-2_ef.pkl", "rb").read())
TR = ["full", "small0"]
FEATS = ABS + RANK
tests = ["full", "small0", "small1", "small2"]


def run(feats):
    pr = loco_predict(data, TR, tests, [COL[f] for f in feats], "lr")
    mf = metrics(C, data["full"], pr["full"])[0]
    ms = [metrics(C, data[t], pr[t])[0] for t in tests[1:]]
    return mf, {k: np.mean([m[k] for m in ms]) for k in ms[0]}, pr


print("#### ablations (LR, K=25, echo filter, trained on full+small0, LOCO)\n")
print("| features | full any@1 | full any@3 | full any@5 | full reach@3,0.5 | small any@3 | small reach@3,0.5 |\n|---|---|---|---|---|---|---|")
groups = {
    "all (abs+rank)": [],
    "- exact entities (ent_frac, has_ents)": ["ent_frac", "has_ents"],
    "- speaker (spk_named, spk_match, side_idf_frac)": ["spk_named", "spk_match", "side_idf_frac"],
    "- temporal (q_when, cand_temporal, when_x_temporal)": ["q_when", "cand_temporal", "when_x_temporal"],
    "- session neighbours (nb_cos, nb_idf_frac, sess_cos)": ["nb_cos", "nb_idf_frac", "sess_cos"],
    "- BM25 normalised (bm25_qnorm, idf_frac, term_frac)": ["bm25_qnorm", "idf_frac", "term_frac"],
    "- list-relative (rank_bge, rank_bm25, cos_gap, bm25_rel)": RANK,
    "- recency, length": ["recency", "log_len"],
}
preds_all = None
for name, drop in groups.items():
    mf, ms, pr = run([f for f in FEATS if f not in drop])
    if not drop:
        preds_all = pr
    print(f"| {name} | {mf['any@1']:.1f} | {mf['any@3']:.1f} | {mf['any@5']:.1f} | {mf['reach@3,0.5']:.1f} | {ms['any@3']:.1f} | {ms['reach@3,0.5']:.1f} |", flush=True)

# paired bootstrap: recommended (LOCO) vs today's fusion (MiniLM, K=20) on full, any@5 and any@3
users = regime_users(C, "full")
today5, today3, new5, new3 = [], [], [], []
for q, ids, r, p in zip(C.questions, users, data["full"], preds_all["full"]):
    ids = np.array(ids)
    bm = BM25(C, ids)
    s_bm = bm.scores(q["qterms"])
    s_mini = C.emb["mini_all"][ids] @ C.emb["mini_q"][q["i"]]
    order = today_fusion(s_mini, s_bm, 20)
    ev = {j for j, i in enumerate(ids) if i in q["evidence"]}
    today5.append(bool(set(order[:5]) & ev)); today3.append(bool(set(order[:3]) & ev))
    ranked = r["cand"][np.argsort(-p, kind="stable")]
    new5.append(bool(set(ranked[:5].tolist()) & q["evidence"])); new3.append(bool(set(ranked[:3].tolist()) & q["evidence"]))
rng = np.random.default_rng(0)
for k, a, b in (("any@5", new5, today5), ("any@3", new3, today3)):
    d = np.array(a, float) - np.array(b, float)
    boots = [d[rng.integers(0, len(d), len(d))].mean() for _ in range(2000)]
    print(f"\n{k}: recommended {100*np.mean(a):.1f} vs today's fusion {100*np.mean(b):.1f}: "
          f"+{100*d.mean():.1f} [95% CI {100*np.percentile(boots, 2.5):+.1f}, {100*np.percentile(boots, 97.5):+.1f}]")

# the shipped model: fit on all five conversations, exported as JSON (standardisation folded in)
cols = [COL[f] for f in FEATS]
X = np.vstack([r["X"][:, cols] for s in TR for r in data[s]])
y = np.concatenate([r["y"] for s in TR for r in data[s]])
sc = StandardScaler().fit(X)
lr = LogisticRegression(C=1.0, max_iter=2000).fit(sc.transform(X), y)
w = lr.coef_[0] / sc.scale_
b = float(lr.intercept_[0] - (lr.coef_[0] * sc.mean_ / sc.scale_).sum())
model = {"kind": "logistic", "features": FEATS, "intercept": round(b, 6),
         "weights": [round(float(v), 6) for v in w],
         "embedder": "bge-small-en-v1.5 int8 onnx sha256 6c9c6101...", "candidates_per_side": 25,
         "trained_on": "LoCoMo dev (5 conversations), full + small-user regime, echo filter"}
json.dump(model, open("second_stage_lr.json", "w"), indent=1)
print("\n#### shipped LR weights (raw feature scale; second_stage_lr.json)\n")
print("| feature | weight |\n|---|---|")
print(f"| intercept | {b:.3f} |")
for f, v in sorted(zip(FEATS, w), key=lambda t: -abs(t[1])):
    print(f"| {f} | {v:.3f} |")

# cost per query: candidate features (+ tokenising the candidates' texts cold) + model
nb = neighbour_map(C)
ts_feat, ts_tok, ts_model, ncand = [], [], [], []
wv, bb = np.array(w), b
for q, ids in list(zip(C.questions, users))[:300]:
    ids = np.array(ids)
    bm = BM25(C, ids)
    t0 = time.perf_counter()
    cand, Xq = candidates_and_features(C, q, ids, bm=bm, K=25, neighbours=nb, echo_filter=True)
    t1 = time.perf_counter()
    lib._stem_cache.clear()  # cold: stem every candidate (and neighbour) text again
    for i in set(cand.tolist()) | {n for c in cand for n in nb.get(int(c), ())}:
        r = C.records[i]
        lib.terms(r["text"]); lib.words(r["text"]); lib.terms(r["user_message"]); lib.terms(r["ai_response"])
    t2 = time.perf_counter()
    z = Xq[:, cols] @ wv + bb
    p = 1 / (1 + np.exp(-z))
    np.argsort(-p)
    t3 = time.perf_counter()
    ts_feat.append((t1 - t0) * 1000); ts_tok.append((t2 - t1) * 1000); ts_model.append((t3 - t2) * 1000); ncand.append(len(cand))
print("\n#### second-stage cost per query (300 questions, full regime, K=25 per side, 1 process, nice 19)\n")
print("| part | p50 ms | p95 ms |\n|---|---|---|")
for n, t in (("features (incl. scoring the user's ~300 memories in numpy)", ts_feat),
             ("tokenising + stemming candidates and neighbours, cold cache", ts_tok),
             ("logistic model + sort", ts_model)):
    print(f"| {n} | {np.percentile(t, 50):.2f} | {np.percentile(t, 95):.2f} |")
print(f"\ncandidates per query: median {np.median(ncand):.0f}, max {max(ncand)}")
