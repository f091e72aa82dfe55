"""Embeddings: turning text into vectors, offline.

Owns the offline models (the default bge-small-en-v1.5, int8 ONNX, whose files ship inside this
package; all-MiniLM-L6-v2 from the `minilm` extra, run on ONNX Runtime from a graph exported
once into the model cache; both checked by hash), which one to load (`choose`: the setting, else
the model the database is bound to, else the default),
and `Embedder`, the async wrapper the store uses around any LangChain `Embeddings` (query
cache, batching, checks).
May import the bottom floor only (`recall.config`, `recall.errors`).
"""

from recall.embeddings.bge import BgeSmallEmbeddings
from recall.embeddings.choose import (
    ModelChoice,
    choose_model,
    configured_embeddings,
    legacy_hint,
    load_embeddings,
)
from recall.embeddings.embedder import Embedder, Vector, embedder_for, embedding_model_name
from recall.embeddings.minilm import (
    EMBEDDING_BACKENDS,
    MINILM_EXTRA,
    MINILM_MODEL_NAME,
    MINILM_SHA256,
    EmbeddingBackend,
    MiniLMEmbeddings,
)

__all__ = [
    "EMBEDDING_BACKENDS",
    "MINILM_EXTRA",
    "MINILM_MODEL_NAME",
    "MINILM_SHA256",
    "BgeSmallEmbeddings",
    "Embedder",
    "EmbeddingBackend",
    "MiniLMEmbeddings",
    "ModelChoice",
    "Vector",
    "choose_model",
    "configured_embeddings",
    "embedder_for",
    "embedding_model_name",
    "legacy_hint",
    "load_embeddings",
]
