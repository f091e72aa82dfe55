"""`MemoryStore`: the facade an application talks to.

Owns input checks, embedding, the choice of search plan per user, fusion of the candidate
lists, erasure across tables and queues, and the process-wide store the default nodes share
(`shared`). It runs SQL only through `recall.db`. May import the floors below it (`recall.db`,
`recall.embeddings`, `recall.search` and the bottom floor).
"""

from recall.store.memory_store import MAX_LIMIT, MemoryStore, StoreConnector

__all__ = ["MAX_LIMIT", "MemoryStore", "StoreConnector"]
