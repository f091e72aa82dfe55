"""Second-stage candidates and features for one (question, user memories) pair."""
from __future__ import annotations

import math
import re

import numpy as np

from lib import BM25, TEMPORAL, UNINFORMATIVE, QWORDS, topk, words

ABS = ["cos_bge", "bm25_qnorm", "idf_frac", "term_frac", "bm25_sat", "ent_frac", "has_ents",
       "spk_named", "spk_match", "side_idf_frac", "q_when", "cand_temporal", "when_x_temporal",
       "log_len", "nb_cos", "nb_idf_frac", "sess_cos", "recency", "is_question", "uninformative",
       "near_dup", "echo"]
RANK = ["rank_bge", "rank_bm25", "cos_gap", "bm25_rel"]
MINI = ["cos_mini"]
SIDE = ["cos_side_max", "cos_side_named"]
LOGN = ["log_n"]
ALL = ABS + RANK + MINI + LOGN + SIDE
COL = {n: i for i, n in enumerate(ALL)}


def is_question(text):
    t = text.strip()
    first = re.findall(r"[a-z]+", t.lower()[:20])
    return t.endswith("?") or (bool(first) and first[0] in QWORDS and len(t) < 200)


def candidates_and_features(C, q, ids, bm=None, K=25, neighbours=None, echo_filter=False):
    """ids: np.array of record ids the user holds. Returns (cand record ids, X [n, len(ALL)])."""
    if bm is None:
        bm = BM25(C, ids)
    qi = q["i"]
    s_bm = bm.scores(q["qterms"])
    cos = C.emb["bge_all"][ids] @ C.emb["bge_q"][qi]
    cos_m = C.emb["mini_all"][ids] @ C.emb["mini_q"][qi]
    has_side = "bge_u" in C.emb
    vr = topk(cos, K)
    kr = [j for j in topk(s_bm, K) if s_bm[j] > 0]
    cand = list(dict.fromkeys(list(vr) + kr))
    if echo_filter:  # drop the user's own earlier question left unanswered, before any list feature
        qs = set(q["qterms"])
        def _echo(j):
            r = C.records[ids[j]]
            us = r["u_tset"]
            unf = bool(UNINFORMATIVE.search(r["ai_response"])) or not [w for w in words(r["ai_response"]) if w not in us]
            return is_question(r["user_message"]) and unf and len(qs & us) / max(len(qs | us), 1) >= 0.5
        drop = {j for j in cand if _echo(j)}
        if drop:
            cand = [j for j in cand if j not in drop]
            vr = np.array([j for j in vr if j not in drop])
            kr = [j for j in kr if j not in drop]
    rank_v = {j: r for r, j in enumerate(vr)}
    rank_k = {j: r for r, j in enumerate(kr)}
    idfs = {t: bm.idf(t) for t in q["qterms"]}
    idf_sum = sum(v for v in idfs.values() if v > 0)
    nq = max(len(q["qterms"]), 1)
    best_bm = max((s_bm[j] for j in kr), default=0.0)
    best_cos = float(cos[vr[0]])
    local = {int(i): j for j, i in enumerate(ids)}
    n = len(ids)
    X = np.zeros((len(cand), len(ALL)))
    recs = C.records
    sess_best = {}
    for j in cand:
        r = recs[ids[j]]
        key = (r["user"], r["session"])
        sess_best.setdefault(key, []).append(cos[j])
    max_sess = max(recs[i]["session"] for i in ids if recs[i]["kind"] == "turn")
    for row, j in enumerate(cand):
        rid = int(ids[j])
        r = recs[rid]
        f = X[row]
        f[COL["cos_bge"]] = cos[j]
        f[COL["cos_mini"]] = cos_m[j]
        b = s_bm[j]
        f[COL["bm25_qnorm"]] = b / idf_sum if idf_sum > 0 else 0.0
        m_idf = sum(v for t, v in idfs.items() if t in r["tset"])
        f[COL["idf_frac"]] = m_idf / idf_sum if idf_sum > 0 else 0.0
        f[COL["term_frac"]] = sum(t in r["tset"] for t in q["qterms"]) / nq
        f[COL["bm25_sat"]] = b / (b + 5.0)
        ents = q["ents"]
        if ents:
            f[COL["ent_frac"]] = sum(e in r["wset"] for e in ents) / len(ents)
            f[COL["has_ents"]] = 1.0
        named = q["named"]
        f[COL["spk_named"]] = float(bool(named))
        f[COL["spk_match"]] = float(bool(named & set(r["speakers"])))
        # per-field: matched idf share on the side spoken by the named speaker (else the better side)
        u = sum(v for t, v in idfs.items() if t in r["u_tset"])
        a = sum(v for t, v in idfs.items() if t in r["a_tset"])
        if named and r["speakers"][0] in named:
            side = u
        elif named and r["speakers"][1] in named:
            side = a
        else:
            side = max(u, a)
        f[COL["side_idf_frac"]] = side / idf_sum if idf_sum > 0 else 0.0
        f[COL["q_when"]] = float(q["when"])
        ct = float(bool(r["wset"] & TEMPORAL) or any(w.isdigit() for w in r["wset"]))
        f[COL["cand_temporal"]] = ct
        f[COL["when_x_temporal"]] = ct * q["when"]
        f[COL["log_len"]] = math.log1p(len(r["terms"]))
        # session neighbours (pos +-1 in the same session), among the user's memories
        nb_c, nb_f = 0.0, 0.0
        for nid in (neighbours or {}).get(rid, ()):
            if nid in local:
                nb_c = max(nb_c, float(cos[local[nid]]))
                nb_f = max(nb_f, sum(v for t, v in idfs.items() if t in recs[nid]["tset"]) / idf_sum if idf_sum > 0 else 0.0)
        f[COL["nb_cos"]] = nb_c
        f[COL["nb_idf_frac"]] = nb_f
        others = sorted(sess_best[(r["user"], r["session"])], reverse=True)
        f[COL["sess_cos"]] = others[1] if len(others) > 1 else 0.0
        f[COL["recency"]] = (r["session"] / max_sess) if r["kind"] == "turn" else 1.0
        isq = is_question(r["user_message"])
        unf = bool(UNINFORMATIVE.search(r["ai_response"])) or len(
            [w for w in words(r["ai_response"]) if w not in r["u_tset"]]) == 0
        f[COL["is_question"]] = float(isq)
        f[COL["uninformative"]] = float(unf)
        qs = set(q["qterms"])
        us = r["u_tset"]
        f[COL["near_dup"]] = len(qs & us) / max(len(qs | us), 1)
        f[COL["echo"]] = float(isq and unf)
        f[COL["rank_bge"]] = 1 / (1 + rank_v[j]) if j in rank_v else 0.0
        f[COL["rank_bm25"]] = 1 / (1 + rank_k[j]) if j in rank_k else 0.0
        f[COL["cos_gap"]] = best_cos - cos[j]
        f[COL["bm25_rel"]] = b / best_bm if best_bm > 0 else 0.0
        f[COL["log_n"]] = math.log(n)
        if has_side:
            cu = float(C.emb["bge_u"][rid] @ C.emb["bge_q"][qi])
            ca = float(C.emb["bge_a"][rid] @ C.emb["bge_q"][qi])
            f[COL["cos_side_max"]] = max(cu, ca)
            if named and r["speakers"][0] in named:
                f[COL["cos_side_named"]] = cu
            elif named and r["speakers"][1] in named:
                f[COL["cos_side_named"]] = ca
            else:
                f[COL["cos_side_named"]] = max(cu, ca)
    return np.array([ids[j] for j in cand]), X


def neighbour_map(C):
    by = {}
    for i, r in enumerate(C.records):
        if r["kind"] == "turn":
            by[(r["user"], r["session"], r["pos"])] = i
    nb = {}
    for (u, s, p), i in by.items():
        nb[i] = [by[k] for k in ((u, s, p - 1), (u, s, p + 1)) if k in by]
    return nb
