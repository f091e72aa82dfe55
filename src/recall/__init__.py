"""recall: long-term memory for LangGraph agents on PostgreSQL + pgvector.

`RecallMiddleware` (for LangChain's `create_agent`) is imported on first use: it needs the
`agents` extra (`langchain`), which the base install does not bring.
"""

from typing import TYPE_CHECKING

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

if TYPE_CHECKING:  # imported on first use (`__getattr__`): it needs the agents extra
    from recall.agents import RecallMiddleware

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
    "RecallMiddleware",
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


def __getattr__(name: str) -> object:
    if name == "RecallMiddleware":
        try:
            from recall.agents import RecallMiddleware
        except ImportError as exc:
            raise ImportError(
                "RecallMiddleware needs langchain: pip install 'langgraph-recall[agents]'"
            ) from exc
        return RecallMiddleware
    raise AttributeError(f"module 'recall' has no attribute {name!r}")
