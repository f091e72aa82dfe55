"""`RecallStore`: `recall` as a LangGraph `BaseStore` (docs/basestore.md).

Owns the BaseStore contract: namespace rules and matching, what gets embedded (LangGraph's
`IndexConfig`), the four operations in op order, TTLs and the sweeper. It runs SQL only
through `recall.db` (`items`, `filters`). May import the floors below it (`recall.db`,
`recall.embeddings`, `recall.search` and the bottom floor); it sits beside `recall.store`.
"""

from recall.basestore.store import RecallStore, RecallStoreConnector

__all__ = ["RecallStore", "RecallStoreConnector"]
