"""Embed records, questions and the repeated-question ("echo") records with both models;
cache to cache/emb.npz. Also time single-query embedding (p50/p95 ms)."""
import sys, time
import numpy as np
from data import load
from models import BGE, MiniLM

records, questions, *_ = load()
rtext = [r["text"] for r in records]
qtext = [q["text"] for q in questions]
echo = [f"{q['text']}\nI'm not sure." for q in questions]
out = {}
t = time.time(); bge = BGE(threads=2); print("bge load", round(time.time() - t, 2), "s")
t = time.time(); out["bge_rec"] = bge.documents(rtext); print("bge docs/s", round(len(rtext) / (time.time() - t), 1))
out["bge_echo"] = bge.documents(echo)
out["bge_q"] = np.stack([bge.query(x) for x in qtext])
out["bge_q_noinst"] = np.stack([bge.query(x, instruction=False) for x in qtext])
t = time.time(); mini = MiniLM(); print("minilm load", round(time.time() - t, 2), "s")
t = time.time(); out["mini_rec"] = mini.documents(rtext); print("minilm docs/s", round(len(rtext) / (time.time() - t), 1))
out["mini_echo"] = mini.documents(echo)
out["mini_q"] = np.stack([mini.query(x) for x in qtext])
np.savez("cache/emb.npz", **out)

def timeit(fn, n=300):
    for x in qtext[:20]: fn(x)
    ts = []
    for x in qtext[:n]:
        t0 = time.perf_counter(); fn(x); ts.append((time.perf_counter() - t0) * 1000)
    return np.percentile(ts, 50), np.percentile(ts, 95)
print("| model | threads | query p50 ms | p95 ms |\n|---|---|---|---|")
for th in (1, 2):
    b = BGE(threads=th)
    p50, p95 = timeit(lambda x: b.query(x))
    print(f"| bge-small int8 ONNX | {th} | {p50:.2f} | {p95:.2f} |")
import torch
for th in (1, 2):
    torch.set_num_threads(th)
    p50, p95 = timeit(lambda x: mini.query(x))
    print(f"| MiniLM (torch) | {th} | {p50:.2f} | {p95:.2f} |")
