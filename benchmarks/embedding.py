"""The default model's two backends side by side: ONNX Runtime (the default) and PyTorch
(sentence-transformers), the same texts alternating in one run.

    python benchmarks/embedding.py [--queries 500]

Reports one short query's embedding time (p50/p95), documents per second in batches of 64,
and the largest difference between the two backends' unit vectors.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import git_revision, machine, run, table, write_section

from recall.embeddings import MiniLMEmbeddings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    models = {"onnx": MiniLMEmbeddings(backend="onnx"), "torch": MiniLMEmbeddings(backend="torch")}
    for model in models.values():
        model.embed_query("warm up")
    assert models["onnx"].backend == "onnx", "the ONNX backend fell back to torch"
    queries = [f"what did I tell you about my trip to Lyon, question {i}?" for i in range(50)]
    queries += [f"what did we say about the vet appointment {i}?" for i in range(args.queries)]
    times: dict[str, list[float]] = {name: [] for name in models}
    for i, text in enumerate(queries):
        order = list(models.items()) if i % 2 else list(reversed(models.items()))
        for name, model in order:
            t0 = time.perf_counter()
            model.embed_query(text)
            if i >= 50:
                times[name].append((time.perf_counter() - t0) * 1000)
    docs = [f"User: I went to the market on day {i} and bought pears\nAssistant: ok" * (1 + i % 3)
            for i in range(640)]  # fmt: skip
    rates, vectors = {}, {}
    for name, model in models.items():
        t0 = time.perf_counter()
        vectors[name] = np.array(model.embed_documents(docs))
        rates[name] = len(docs) / (time.perf_counter() - t0)
    diff = float(np.abs(vectors["onnx"] - vectors["torch"]).max())
    p50 = {name: float(np.percentile(v, 50)) for name, v in times.items()}
    rows = [
        [name, f"{p50[name]:.2f}", f"{np.percentile(times[name], 95):.2f}", f"{rates[name]:,.0f}"]
        for name in models
    ]
    body = f"""## Query embedding: ONNX Runtime and PyTorch backends

`python benchmarks/embedding.py --queries {args.queries}` on {machine()}, commit
{git_revision()}: all-MiniLM-L6-v2, one short query per call through `MiniLMEmbeddings`
(tokenizer and pooling included), the backends alternating query by query; documents in
batches of 64.

{table(["backend", "query p50 ms", "query p95 ms", "documents/s"], rows)}

ONNX / PyTorch at p50: {p50["onnx"] / p50["torch"]:.2f}. Largest difference between the two
backends' unit vectors over {len(docs)} documents: {diff:.1e} (decision 0007).
"""
    print(body)
    if not args.no_write:
        write_section("embedding", body)


if __name__ == "__main__":
    run(main)
