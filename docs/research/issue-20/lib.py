"""Retrieval in pure Python: PostgreSQL-like BM25 (english stop words + Snowball stemmer, binary
term frequency, k1 1.2, b 0.75, df and N over the user's memories), dense cosines, candidate
unions, second-stage features, regimes (full / small-user / repeated-question / pooled)."""
from __future__ import annotations

import math
import re
from collections import defaultdict

import numpy as np
import snowballstemmer

from data import load

STOP = set(open("/usr/share/postgresql/15/tsearch_data/english.stop").read().split())
_STEM = snowballstemmer.stemmer("english")
_WORD = re.compile(r"[^\W_]+")
_stem_cache: dict[str, str] = {}


def words(text):
    return _WORD.findall(text.lower())


def stem(w):
    s = _stem_cache.get(w)
    if s is None:
        s = _stem_cache[w] = _STEM.stemWord(w)
    return s


def terms(text):
    """tsvector-like: non-stop words, stemmed, with repeats (doc_len counts positions)."""
    return [stem(w) for w in words(text) if w not in STOP]


MONTHS = {m.lower() for m in "January February March April May June July August September October November December".split()}
TEMPORAL = MONTHS | {"yesterday", "today", "tomorrow", "ago", "last", "next", "week", "weekend", "month", "year",
                     "weeks", "months", "years", "recently", "since", "soon", "tonight", "morning", "evening"}
QWORDS = {"what", "when", "where", "who", "why", "how", "which", "did", "does", "do", "is", "was", "would",
          "could", "has", "have", "are", "were", "can", "will", "should"}
UNINFORMATIVE = re.compile(
    r"^\s*(i'?m not sure|i am not sure|i don'?t know|i do not know|no idea|not sure|i can'?t (say|tell)|"
    r"i have no (idea|information)|sorry,? i don'?t (know|have))\b", re.I)


def entities(question):
    """Names, numbers and dates asked about: capitalized words not first (or first if not a
    question word), digits, months, years."""
    toks = re.findall(r"[A-Za-z][\w'-]*|\d+", question)
    out = set()
    for i, t in enumerate(toks):
        base = t.split("'")[0].lower()
        if t[0].isdigit():
            out.add(t)
        elif t[0].isupper() and (i > 0 or base not in QWORDS) and base not in STOP:
            out.add(base)
    return out


class Corpus:
    def __init__(self):
        self.records, self.questions, self.skipped_ev, self.skipped_q = load()
        e = np.load("cache/emb.npz")
        self.emb = {k: e[k] for k in e.files}
        for r in self.records:
            r["terms"] = terms(r["text"])
            r["tset"] = set(r["terms"])
            r["wset"] = set(words(r["text"]))
            r["u_tset"] = set(terms(r["user_message"]))
            r["a_tset"] = set(terms(r["ai_response"]))
        for i, q in enumerate(self.questions):
            q["i"] = i
            q["qterms"] = list(dict.fromkeys(terms(q["text"])))
            q["ents"] = entities(q["text"])
            q["when"] = q["text"].lower().startswith("when") or "what year" in q["text"].lower() or "how long" in q["text"].lower()
            q["named"] = {s for s in q["speakers"] if re.search(r"\b" + re.escape(s) + r"\b", q["text"])}
        self.by_user = defaultdict(list)
        for i, r in enumerate(self.records):
            self.by_user[r["user"]].append(i)
        # echo records (question asked before, answered "I'm not sure."), appended after the corpus
        self.n_rec = len(self.records)
        for q in self.questions:
            text = f"{q['text']}\nI'm not sure."
            self.records.append(dict(user=q["user"], session=10_000, pos=0, when=None,
                                     user_message=q["text"], ai_response="I'm not sure.", speakers=("user", "assistant"),
                                     text=text, kind="echo", terms=terms(text), tset=set(terms(text)),
                                     wset=set(words(text)), u_tset=set(terms(q["text"])), a_tset=set()))
        self.emb["bge_all"] = np.vstack([self.emb["bge_rec"], self.emb["bge_echo"]])
        self.emb["mini_all"] = np.vstack([self.emb["mini_rec"], self.emb["mini_echo"]])
        try:
            e2 = np.load("cache/emb_sides.npz")
            self.emb["bge_u"], self.emb["bge_a"] = e2["bge_u"], e2["bge_a"]
        except FileNotFoundError:
            pass

    def echo_id(self, qi):
        return self.n_rec + qi


class BM25:
    """BM25 as recall.search_keyword computes it, over one user's memory ids."""

    def __init__(self, corpus, ids, k1=1.2, b=0.75):
        self.ids = np.asarray(ids)
        self.recs = [corpus.records[i] for i in ids]
        self.dl = np.array([max(len(r["terms"]), 0) for r in self.recs], dtype=float)
        self.avgdl = max(self.dl.mean() if len(ids) else 1.0, 1.0)
        self.N = max(len(ids), 1)
        self.post = defaultdict(list)
        for j, r in enumerate(self.recs):
            for t in r["tset"]:
                self.post[t].append(j)
        self.norm = (k1 + 1) / (1 + k1 * ((1 - b) + b * self.dl / self.avgdl))

    def idf(self, t):
        df = len(self.post.get(t, ()))
        return math.log(1 + (self.N - df + 0.5) / (df + 0.5)) if df else 0.0

    def scores(self, qterms):
        s = np.zeros(len(self.ids))
        for t in qterms:
            p = self.post.get(t)
            if p:
                s[p] += self.idf(t) * self.norm[p]
        return s


def topk(scores, k):
    k = min(k, len(scores))
    idx = np.argpartition(-scores, k - 1)[:k]
    return idx[np.argsort(-scores[idx], kind="stable")]


def rrf(*rankings, k=60):
    s = defaultdict(float)
    for r in rankings:
        for rank, i in enumerate(r):
            s[i] += 1.0 / (k + rank + 1)
    return sorted(s, key=lambda i: -s[i])


# ---------------------------------------------------------------- regimes
def regime_users(corpus, regime, seed=0, echo=False):
    """For each question: the memory ids its user holds."""
    rng = np.random.default_rng(seed)
    out = []
    for q in corpus.questions:
        user_ids = corpus.by_user[q["user"]]
        if regime == "full":
            ids = list(user_ids)
        elif regime == "pooled":
            ids = list(range(corpus.n_rec))
        elif regime == "small":
            ev_sess = {corpus.records[i]["session"] for i in q["evidence"]}
            others = sorted({corpus.records[i]["session"] for i in user_ids} - ev_sess)
            pick = set(rng.choice(others, size=min(2, len(others)), replace=False).tolist())
            ids = [i for i in user_ids if corpus.records[i]["session"] in ev_sess | pick]
        else:
            raise ValueError(regime)
        if echo:
            ids = ids + [corpus.echo_id(q["i"])]
        out.append(ids)
    return out
