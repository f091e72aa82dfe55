"""Table 1: first-stage retrievers, any@k in the full-conversation regime (and other regimes).
    venv/bin/python baselines.py"""
import sys
import numpy as np
from rank_bm25 import BM25Okapi
from lib import Corpus, BM25, topk, rrf, regime_users
from fusion_today import today_fusion

C = Corpus()
KS = (1, 3, 5, 10)


def evaluate(regime):
    users = regime_users(C, regime)
    hits = {}
    cover = {}
    for q, ids in zip(C.questions, users):
        ids = np.array(ids)
        bm = BM25(C, ids)
        s_bm = bm.scores(q["qterms"])
        s_bge = C.emb["bge_all"][ids] @ C.emb["bge_q"][q["i"]]
        s_bge_ni = C.emb["bge_all"][ids] @ C.emb["bge_q_noinst"][q["i"]]
        s_mini = C.emb["mini_all"][ids] @ C.emb["mini_q"][q["i"]]
        okapi = BM25Okapi([r.split() for r in (C.records[i]["text"].lower() for i in ids)])
        s_ok = okapi.get_scores(q["text"].lower().split())
        rk = {n: list(topk(s, 50)) for n, s in [("bm25", s_bm), ("bge", s_bge), ("bge_noinst", s_bge_ni),
                                                 ("mini", s_mini), ("rank_bm25", s_ok)]}
        rk["rrf_bge_bm25"] = rrf(rk["bm25"], rk["bge"])
        rk["rrf_mini_bm25"] = rrf(rk["bm25"], rk["mini"])
        rk["rrf_bge_mini_bm25"] = rrf(rk["bm25"], rk["bge"], rk["mini"])
        rk["today_fusion_minilm_K20"] = today_fusion(s_mini, s_bm, 20)
        ev = {j for j, i in enumerate(ids) if i in q["evidence"]}
        for name, r in rk.items():
            for k in KS:
                hits.setdefault(name, {}).setdefault(k, []).append(bool(set(r[:k]) & ev))
        for K in (10, 20, 25, 30, 50):
            u = set(rk["bm25"][:K]) | set(rk["bge"][:K])
            cover.setdefault(K, []).append(bool(u & ev))
            u2 = u | set(rk["mini"][:K])
            cover.setdefault(f"{K}+mini", []).append(bool(u2 & ev))
    print(f"\n### regime: {regime}  ({len(C.questions)} questions, mean memories per user {np.mean([len(u) for u in users]):.0f})\n")
    print("| retriever | " + " | ".join(f"any@{k}" for k in KS) + " |\n|---|" + "---|" * len(KS))
    for name, h in hits.items():
        print(f"| {name} | " + " | ".join(f"{100*np.mean(h[k]):.1f}" for k in KS) + " |")
    print("\nCandidate union (top K of bge + top K of BM25) holds evidence:\n")
    print("| K per side | " + " | ".join(str(k) for k in cover) + " |\n|---|" + "---|" * len(cover))
    print("| any evidence in union % | " + " | ".join(f"{100*np.mean(v):.1f}" for v in cover.values()) + " |")


for reg in sys.argv[1:] or ["full"]:
    evaluate(reg)
