"""Issue 57's student before training: bge-small-en-v1.5 rebuilt in fp32 for torch from the int8
ONNX the package ships (no fp32 weights of it are on disk, and nothing is fetched), as
docs/research/issue-45/encoder-finetune.md did: each `MatMulInteger` weight dequantised per output
column, `(w - zero_point) * scale`, and named by the bias its output is added to; the three
embedding tables dequantised from their `DequantizeLinear` inputs; layer norms and biases as
they are (fp32 in the file). Encodes as the shipped embedder does: CLS pooling, L2-normalised,
the BGE instruction before a query.

Needs torch (2.13.0, the CPU build) and transformers (the `minilm` extra).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from recall.embeddings.bge import QUERY_INSTRUCTION, packaged_model_files

TOKENS = 512  # the shipped embedder's cut


def _consumers(graph: Any) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            out.setdefault(name, []).append(node)
    return out


def _bias_after(start: str, consumers: dict[str, list[Any]], inits: dict[str, Any]) -> str:
    """The name of the bias added (within a few steps) to what `start` flows into."""
    out = start
    for _ in range(4):
        (node, *_rest) = consumers[out]
        named = [i for i in node.input if i in inits and i.endswith(".bias")]
        if node.op_type == "Add" and named:
            return str(named[0])
        out = node.output[0]
    raise ValueError(f"no bias after {start}")


def fp32_weights() -> dict[str, np.ndarray]:
    """The packaged model's weights (`recall.embeddings.bge.packaged_model_files`) in fp32 by
    their `transformers.BertModel` names (a linear layer's weight as torch holds it: output
    rows)."""
    graph = onnx.load_from_string(packaged_model_files()[0].read_bytes()).graph
    inits = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    consumers = _consumers(graph)
    out: dict[str, np.ndarray] = {}
    for name, value in inits.items():
        if name.endswith(("LayerNorm.weight", ".bias")):
            out[name] = value.astype(np.float32)
        elif name.startswith("embeddings.") and name.endswith(".weight_quantized"):
            base = name.removesuffix("_quantized")
            zero = inits[base + "_zero_point"].astype(np.float32)
            out[base] = (value.astype(np.float32) - zero) * inits[base + "_scale"]
    for node in graph.node:
        if node.op_type != "MatMulInteger":
            continue
        weight, zero = node.input[1], node.input[3]
        scale = inits[weight.removesuffix("_quantized") + "_scale"]
        dense = (inits[weight].astype(np.float32) - inits[zero].astype(np.float32)) * scale
        bias = _bias_after(node.output[0], consumers, inits)
        out[bias.removesuffix(".bias") + ".weight"] = np.ascontiguousarray(dense.T)
    return out


class Student:
    """bge-small as torch trains it: `model` (a `transformers.BertModel`), its tokenizer, and
    `encode` as the shipped embedder encodes (gradients when the model is in training mode).

    Args:
        weights: `fp32_weights()` or a trained student's state.
        threads: torch's intra-op threads.
    """

    def __init__(self, weights: dict[str, np.ndarray] | None = None, threads: int = 2) -> None:
        import torch
        from tokenizers import Tokenizer
        from transformers import BertConfig, BertModel

        torch.set_num_threads(threads)
        self.torch = torch
        config = BertConfig(vocab_size=30522, hidden_size=384, num_hidden_layers=12,
                            num_attention_heads=12, intermediate_size=1536,
                            max_position_embeddings=512, layer_norm_eps=1e-12)  # fmt: skip
        model: Any = BertModel(config, add_pooling_layer=False)
        state = {k: torch.from_numpy(v) for k, v in (weights or fp32_weights()).items()}
        missing, unexpected = model.load_state_dict(state, strict=False)
        unused = [m for m in missing if not m.endswith("position_ids")]
        if unused or unexpected:
            raise ValueError(f"weights do not fit: missing {unused}, unexpected {unexpected}")
        self.model: Any = model.eval()
        self.tokenizer: Any = Tokenizer.from_str(packaged_model_files()[1].read_text("utf-8"))

    def encode(self, texts: Sequence[str], *, queries: bool = False, tokens: int = TOKENS) -> Any:
        """The texts' unit vectors, one row each (a torch tensor), the instruction before each
        when `queries`, each cut at `tokens` tokens (the shipped embedder's 512 by default)."""
        torch = self.torch
        self.tokenizer.enable_truncation(tokens)
        batch = self.tokenizer.encode_batch(
            [QUERY_INSTRUCTION + t if queries else t for t in texts]
        )
        width = max(len(e.ids) for e in batch)
        ids = torch.zeros((len(batch), width), dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, e in enumerate(batch):
            ids[row, : len(e.ids)] = torch.tensor(e.ids)
            mask[row, : len(e.ids)] = 1
        hidden = self.model(input_ids=ids, attention_mask=mask).last_hidden_state
        return torch.nn.functional.normalize(hidden[:, 0, :], dim=1)


def export_int8(state: Path, folder: Path) -> Path:
    """A trained student (`state`: its `torch.save`d weights) as the store runs bge-small: ONNX
    (`input_ids`, `attention_mask`, `token_type_ids` -> `last_hidden_state`) quantised to int8
    by ONNX Runtime's dynamic quantiser, per output column, full range (against the student in
    fp32: cosine 0.984 and up on the probe texts, where a reduced range gave 0.943), with the
    shipped tokenizer beside it, in `folder` (`model_quantized.onnx`, `tokenizer.json`);
    `folder` returned."""
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    student = Student({k: v.numpy() for k, v in torch.load(state).items()})
    # attention written out as bge-small's export has it: transformers' SDPA path exports a
    # masked, NaN-guarded softmax per layer: 1.17-1.22x bge-small's query time (four runs), against
    # 1.09-1.11x (three)
    student.model.set_attn_implementation("eager")
    names = ["input_ids", "attention_mask", "token_type_ids"]

    class _Graph(torch.nn.Module):
        def __init__(self, model: Any) -> None:
            super().__init__()
            self.model = model

        def forward(self, *inputs: Any) -> Any:
            return self.model(**dict(zip(names, inputs, strict=True))).last_hidden_state

    folder.mkdir(parents=True, exist_ok=True)
    fp32 = folder / "model_fp32.onnx"
    ids = torch.ones((1, 16), dtype=torch.long)
    axes = {n: {0: "batch", 1: "tokens"} for n in [*names, "last_hidden_state"]}
    with warnings.catch_warnings():
        # the TorchScript exporter warns that it is deprecated (the new one needs onnxscript) and
        # its tracer notes each Python branch on a shape: the graph is checked against torch
        warnings.simplefilter("ignore")
        torch.onnx.export(_Graph(student.model), (ids, ids, torch.zeros_like(ids)), str(fp32),
                          input_names=names, output_names=["last_hidden_state"],
                          dynamic_axes=axes, opset_version=14, dynamo=False)  # fmt: skip
    quantize_dynamic(str(fp32), str(folder / "model_quantized.onnx"), per_channel=True,
                     reduce_range=False, weight_type=QuantType.QInt8)  # fmt: skip
    fp32.unlink()
    (folder / "tokenizer.json").write_bytes(packaged_model_files()[1].read_bytes())
    return folder
