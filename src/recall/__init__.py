"""recall: long-term memory for LangGraph agents on PostgreSQL + pgvector."""

from recall.basestore import RecallStore
from recall.config import Settings
from recall.creation.consolidate import ConsolidationScheduler, Consolidator
from recall.embeddings import BgeSmallEmbeddings, Embedder, MiniLMEmbeddings
from recall.errors import (
    ConfigError,
    EmbeddingError,
    EmbeddingMismatchError,
    ExtensionMissingError,
    InvalidInputError,
    MigrationError,
    RecallError,
    StoreError,
)
from recall.memory import Memory
from recall.nodes import (
    create_retrieve_memories_node,
    create_store_memories_node,
    retrieve_memories,
    store_memories,
)
from recall.nodes.context import create_chat_summary_node, create_recent_memories_node
from recall.nodes.keyword import create_keyword_search_node
from recall.nodes.tool import create_memory_search_tool
from recall.search.rerank import ChatModelReranker, Reranker
from recall.store import Found, MemoryStore, SearchResult

__all__ = [
    "BgeSmallEmbeddings",
    "ChatModelReranker",
    "ConfigError",
    "ConsolidationScheduler",
    "Consolidator",
    "Embedder",
    "EmbeddingError",
    "EmbeddingMismatchError",
    "ExtensionMissingError",
    "Found",
    "InvalidInputError",
    "Memory",
    "MemoryStore",
    "MigrationError",
    "MiniLMEmbeddings",
    "RecallError",
    "RecallStore",
    "Reranker",
    "SearchResult",
    "Settings",
    "StoreError",
    "create_chat_summary_node",
    "create_keyword_search_node",
    "create_memory_search_tool",
    "create_recent_memories_node",
    "create_retrieve_memories_node",
    "create_store_memories_node",
    "retrieve_memories",
    "store_memories",
]
