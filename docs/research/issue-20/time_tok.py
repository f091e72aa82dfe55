"""Tokenising + stemming one query's ~42 candidate texts (and neighbours): cold vs warm stem cache."""
import time, numpy as np, lib
from lib import Corpus, regime_users, BM25
from features import candidates_and_features, neighbour_map
C = Corpus(); nb = neighbour_map(C); users = regime_users(C, "full")
res = {"cold": [], "warm": []}
for q, ids in list(zip(C.questions, users))[:200]:
    ids = np.array(ids)
    cand, _ = candidates_and_features(C, q, ids, bm=BM25(C, ids), K=25, neighbours=nb, echo_filter=True)
    todo = set(cand.tolist()) | {n for c in cand for n in nb.get(int(c), ())}
    for mode in ("cold", "warm"):
        if mode == "cold": lib._stem_cache.clear()
        t0 = time.perf_counter()
        for i in todo:
            r = C.records[i]; lib.terms(r["text"]); lib.words(r["text"]); lib.terms(r["user_message"]); lib.terms(r["ai_response"])
        res[mode].append((time.perf_counter() - t0) * 1000)
for m, t in res.items():
    print(f"| tokenise+stem candidates, {m} stem cache | {np.percentile(t,50):.2f} | {np.percentile(t,95):.2f} |")
