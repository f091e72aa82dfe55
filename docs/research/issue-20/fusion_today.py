"""Today's package fusion (src/recall/search/fusion.py, DEFAULT_FUSION) over top-K of each side."""
import math
import numpy as np
from lib import topk

W = (-3.1015, (2.9865, 3.0351, -0.6942, 1.7329, 1.7555))


def today_scores(cos, bm, K):
    vr = list(topk(cos, K))
    kr = [j for j in topk(bm, K) if bm[j] > 0]
    cands = list(dict.fromkeys(vr + kr))
    best = max((bm[j] for j in kr), default=0.0)
    out = {}
    for j in cands:
        v = 1 / (1 + vr.index(j)) if j in vr else 0.0
        k = 1 / (1 + kr.index(j)) if j in kr else 0.0
        b = bm[j] if j in kr else 0.0
        x = (max(0.0, cos[j]), b / best if best > 0 else 0.0, b / (b + 5.0), v, k)
        z = W[0] + sum(w * f for w, f in zip(W[1], x))
        out[j] = 1 / (1 + math.exp(-z))
    return out


def today_fusion(cos, bm, K):
    s = today_scores(cos, bm, K)
    return sorted(s, key=lambda j: -s[j])
