"""The default model's backends side by side: ONNX Runtime with the fused graph (the default),
ONNX Runtime with the plain export used before decision 0011, and PyTorch
(sentence-transformers), with the other offline model, bge-small-en-v1.5 (int8 ONNX), on the
same texts in one run.

    python benchmarks/embedding.py [--queries 500] [--documents 640]

Reports the time to embed one short query and one conversation turn pair (the text `add_turn`
embeds: LoCoMo pairs, about 80 tokens) as p50/p95, documents per second in batches of 64, and
the largest difference between the backends' unit vectors. Writes docs/benchmarks.md
(section "embedding").
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from harness.corpus import conversation_pairs
from harness.report import git_revision, machine, publish, table
from harness.run import parser, run
from harness.timing import percentiles, rotated
from langchain_core.embeddings import Embeddings

from recall.embeddings import BgeSmallEmbeddings, MiniLMEmbeddings
from recall.embeddings.minilm import _MAX_TOKENS
from recall.embeddings.onnx_encoder import OnnxEncoder, export_onnx
from recall.memory import embedding_text

BLOCK = 20  # texts per model before switching to the next one
BGE = "bge-small-en-v1.5 (int8 ONNX)"


class PlainOnnx(MiniLMEmbeddings):
    """The default backend, tokenizer, pooling and batching included, running the graph as
    exported before decision 0011 (SDPA attention, no fusion). No fallback to torch."""

    def _load_onnx(self, model_dir: Path, digest: str) -> Any:
        path = export_onnx(model_dir, digest, self.cache_dir, _MAX_TOKENS, fused=False)
        return OnnxEncoder(path, model_dir, max_length=_MAX_TOKENS)


def timed_blocks(models: dict[str, Embeddings], texts: list[str]) -> dict[str, list[float]]:
    """Each model embeds the same blocks of texts one by one, the order of the models turning
    with each block; a pause before each block lets the previous model's threads go idle (ONNX
    Runtime and PyTorch workers spin for a while after a call) and the block's first call is
    not counted."""
    times: dict[str, list[float]] = {name: [] for name in models}
    for b, start in enumerate(range(0, len(texts), BLOCK)):
        for name in rotated(list(models), b):
            embed = models[name].embed_query
            time.sleep(0.05)
            for k, text in enumerate(texts[start : start + BLOCK]):
                t0 = time.perf_counter()
                embed(text)
                if k:
                    times[name].append((time.perf_counter() - t0) * 1000)
    return times


def main() -> None:
    """Load the three backends, time them in turns; print and write."""
    options = parser(__doc__, data=True)
    options.add_argument("--queries", type=int, default=500, help="queries and turn pairs timed")
    options.add_argument("--documents", type=int, default=640, help="turn pairs in batches")
    args = options.parse_args()
    revision = git_revision()
    with tempfile.TemporaryDirectory() as tmp:
        minilm = {
            "onnx (fused, default)": MiniLMEmbeddings(backend="onnx"),
            "onnx (plain export)": PlainOnnx(backend="onnx", cache_dir=Path(tmp)),
            "torch": MiniLMEmbeddings(backend="torch"),
        }
        models: dict[str, Embeddings] = {**minilm, BGE: BgeSmallEmbeddings()}
        for model in models.values():
            model.embed_query("warm up")
        assert [m.backend for m in minilm.values()] == ["onnx", "onnx", "torch"], "fell back"
        queries = [f"what did we say about the vet appointment {i}?" for i in range(args.queries)]
        all_pairs = [embedding_text(a, b) for a, b in conversation_pairs(args.data)]
        pairs = all_pairs[: args.queries]
        query_times = timed_blocks(models, queries)
        pair_times = timed_blocks(models, pairs)
        texts = all_pairs[: args.documents]
        rates, vectors = {}, {}
        for name, model in models.items():
            time.sleep(0.05)
            t0 = time.perf_counter()
            vectors[name] = np.array(model.embed_documents(texts))
            rates[name] = len(texts) / (time.perf_counter() - t0)
    torch_vectors = vectors["torch"]
    rows = []
    for name in models:
        q50, q95 = percentiles(query_times[name], [50, 95])
        t50, t95 = percentiles(pair_times[name], [50, 95])
        diff = "-" if name == BGE else f"{np.abs(vectors[name] - torch_vectors).max():.1e}"
        rows.append([name, f"{q50:.2f}", f"{q95:.2f}", f"{t50:.2f}", f"{t95:.2f}",
                     f"{rates[name]:,.0f}", diff])  # fmt: skip

    def ratio(a: str, b: str, times: dict[str, list[float]], q: int) -> str:
        return f"{percentiles(times[a], [q])[0] / percentiles(times[b], [q])[0]:.2f}"

    fused, plain = "onnx (fused, default)", "onnx (plain export)"
    headers = ["backend", "query p50 ms", "query p95 ms", "turn pair p50 ms", "turn pair p95 ms",
               "turn pairs/s (batches of 64)", "largest difference from torch"]  # fmt: skip
    ratio_rows = [
        [label, *(ratio(a, b, t, q) for t in (query_times, pair_times) for q in (50, 95))]
        for label, a, b in (
            ("fused / plain ONNX graph", fused, plain),
            ("fused ONNX / PyTorch", fused, "torch"),
            ("bge-small / fused ONNX MiniLM", BGE, fused),
        )
    ]
    ratios = table(["ratio", *(h.removesuffix(" ms") for h in headers[1:5])], ratio_rows)
    body = f"""## Embedding: ONNX Runtime (fused and plain graphs), PyTorch and bge-small

`python benchmarks/embedding.py --queries {args.queries}` on {machine()}, commit
{revision}: all-MiniLM-L6-v2 on each backend, and bge-small-en-v1.5 (int8 ONNX,
with its query instruction), one text per call (tokenizer and pooling included): a short
query, and a LoCoMo turn pair as `add_turn` embeds it. The backends take turns in blocks
of {BLOCK} texts (decision 0011); documents are {len(texts)} turn pairs in batches of 64.

{table(headers, rows)}

{ratios}

The largest difference is over the components of the unit vectors of the {len(texts)} turn
pairs (decisions 0007 and 0011).
"""
    publish("embedding", body, write=not args.no_write)


if __name__ == "__main__":
    run(main)
