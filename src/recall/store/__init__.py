"""`MemoryStore`: the facade an application talks to.

Owns input checks, embedding, the choice of search plan per user, fusion of the candidate
lists, what a search resolved and decided (`SearchResult`, the one answer its callers
render), erasure across tables and queues, memory creation's per-conversation state, and the
process-wide store the default nodes share (`shared`). It runs SQL only through `recall.db`.
May import the floors below it (`recall.db`, `recall.embeddings`, `recall.search` and the
bottom floor).
"""

from recall.store.checks import MAX_LIMIT
from recall.store.erasure import Retention
from recall.store.memory_store import MemoryStore, StoreConnector
from recall.store.results import Found, SearchResult

__all__ = ["MAX_LIMIT", "Found", "MemoryStore", "Retention", "SearchResult", "StoreConnector"]
