"""MemoryStore: store, search, list and erase one user's memories in PostgreSQL + pgvector.

The class is composed of one part per job, each in its own module over `StoreBase` (pools,
connection scoping, plan cache): `writes` (add_turn), `bulk` (add_turns), `search` (search,
keyword_search), `maintenance` (index builds, optimize, stats), `reads` (recent, get),
`conversations` (memory creation's state) and `erasure` (delete, forget_user).
"""

from __future__ import annotations

from langchain_core.embeddings import Embeddings

from recall.config import Settings
from recall.search.second_stage import SecondStage
from recall.store.bulk import Bulk
from recall.store.checks import MAX_LIMIT
from recall.store.connect import StoreConnector
from recall.store.conversations import Conversations
from recall.store.erasure import Erasure
from recall.store.reads import Reads
from recall.store.search import Search
from recall.store.writes import Writes

__all__ = ["MAX_LIMIT", "MemoryStore", "StoreConnector"]


class MemoryStore(Writes, Bulk, Search, Reads, Conversations, Erasure):
    """Long-term memory of many users in one PostgreSQL database.

    Open it with `MemoryStore.connect()`; the constructor takes ready parts (a pool whose
    connections have pgvector registered, an `Embedder`, `Settings`) for callers that manage
    their own. Every method is for one user, and no method returns another user's rows.
    """

    @classmethod
    def connect(
        cls,
        settings: Settings | None = None,
        *,
        embeddings: Embeddings | None = None,
        embedding_model_name: str | None = None,
        second_stage: SecondStage | bool = True,
    ) -> StoreConnector:
        """Open a store: `async with MemoryStore.connect() as store:` (or `await` it).

        Args:
            settings: None reads `Settings.from_env()`. With no database URL, the embedded
                server starts (or is reused) in `settings.data_dir`.
            embeddings: any LangChain `Embeddings`; None loads `settings.embedding_model`, or,
                left unset, the model the database is bound to, else the default
                (`recall.embeddings.configured_embeddings`).
            embedding_model_name: the name recorded with the data for `embeddings`.
            second_stage: the default mode's ranking (docs/retrieval.md): True for the one
                fitted for the embedder's model (the fusion of decision 0005 where none is),
                False for that fusion always, or a `SecondStage` of your own fit.

        Raises:
            ConfigError, StoreError, MigrationError, EmbeddingMismatchError: set-up failed.
        """
        return StoreConnector(cls, settings, embeddings, embedding_model_name, second_stage)
