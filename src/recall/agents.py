"""RecallMiddleware: long-term memory for agents built with LangChain's `create_agent`.

Once per agent turn, before the first model call (`before_agent`), it retrieves the user's
memories for their latest message with the store's defaults, as `retrieve_memories` does. Each
model call of the turn (the tool loop included) gets them as a system block
(`wrap_model_call`); after the agent ends (`after_agent`) the user/AI turn is stored with its
provenance, as `store_memories` does. Sync agents (`invoke`, `stream`) and async ones alike, and
no failure of it fails a turn. Needs the `agents` extra (`pip install
'langgraph-recall[agents]'`, which brings `langchain`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, NotRequired

import structlog
from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest
from langchain.agents.middleware.types import ModelResponse, OmitFromInput
from langchain_core.messages import SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config
from langgraph.runtime import Runtime

from recall.config import RetrievalMode, Settings, process_settings
from recall.messages import thread_id, user_id_of
from recall.metrics import METRICS
from recall.nodes.blocking import run_or
from recall.nodes.retrieve import Retrieval, RetrievedMemory, retrieve_recorded
from recall.nodes.store_memories import write_safely, writing_for
from recall.nodes.tool import create_memory_search_tool
from recall.store.memory_store import MemoryStore
from recall.store.shared import StoreProvider, home_loop, provider_for

__all__ = ["DEFAULT_TEMPLATE", "RecallMiddleware", "RecallState", "render_memories"]

log = structlog.stdlib.get_logger(__name__)

DEFAULT_TEMPLATE = (
    "What you remember of this user from earlier conversations, most relevant first:\n{memories}"
)
"""The system block the memories go into; `{memories}` is replaced by their lines."""


class RecallState(AgentState[Any]):
    """The agent's state with the memories retrieved for this turn (returned, not taken as
    input)."""

    retrieved_memories: NotRequired[Annotated[list[RetrievedMemory], OmitFromInput]]


def render_memories(memories: Sequence[RetrievedMemory]) -> str:
    """The memories as lines: what the user said, and the reply when there was one."""
    lines = []
    for m in memories:
        line = f"- The user said: {m['user_message']}"
        if m["ai_response"]:
            line += f"\n  You replied: {m['ai_response']}"
        lines.append(line)
    return "\n".join(lines)


class RecallMiddleware(AgentMiddleware[RecallState, Any]):
    """Memory for a `create_agent` agent: retrieved once a turn, handed to the model as a system
    block, the turn stored after the agent ends.

    The user is `config["configurable"]["langgraph_auth_user"]` (as in the nodes), else the
    `user_id` of the run's context (`agent.invoke(..., context={"user_id": "alice"})`, a
    dataclass or pydantic context too). With neither it does nothing, and says so once in the
    log (`memory.middleware.no_user`).

    Args:
        store: a store, an async callable returning one, or None for the process-wide store.
        limit, similarity_threshold, mode: as `create_retrieve_memories_node`'s; None: the
            store's defaults (3, 0.5, hybrid).
        template: the system block; its `{memories}` is replaced by `render_memories`' lines.
            It is appended to the agent's own system prompt, and left out when nothing is
            retrieved.
        search_tool: also give the agent the `memory_search` tool, searching the same user's
            memories.
        settings: the retrieval's and the writer's settings; `process_settings()` when None.
        queue_path: the writer's durable queue file; `settings.queue_path` when None.
        wait_s: how long the writer waits for the database before handing the turn off.

    Raises:
        ValueError: the template has no `{memories}`.
    """

    state_schema = RecallState

    def __init__(
        self,
        store: MemoryStore | StoreProvider | None = None,
        *,
        limit: int | None = None,
        similarity_threshold: float | None = None,
        mode: RetrievalMode | None = None,
        template: str = DEFAULT_TEMPLATE,
        search_tool: bool = False,
        settings: Settings | None = None,
        queue_path: Path | None = None,
        wait_s: float = 2.0,
    ) -> None:
        super().__init__()
        if "{memories}" not in template:
            raise ValueError("the template must hold {memories}, where the memories go")
        cfg = settings or process_settings()
        provider = provider_for(store)
        self.template = template
        self._home = home_loop(provider)
        self._retrieval = Retrieval(
            provider=provider,
            settings=cfg,
            metrics=METRICS,
            limit=limit,
            similarity_threshold=similarity_threshold,
            mode=mode,
            timeout_ms=cfg.search_timeout_ms,
            reranker=None,
            vector_search=True,
            top_k=25,
            rerank_timeout_ms=0,
        )
        self._writing = writing_for(provider, settings=cfg, queue_path=queue_path, wait_s=wait_s)
        self.tools = [create_memory_search_tool(provider)] if search_tool else []
        self._told_no_user = False

    def _user(self, runtime: Runtime[Any]) -> tuple[str | None, str | None]:
        """The run's user and thread; the first run without a user is logged."""
        config = _config()
        user_id = user_id_of(config, getattr(runtime, "context", None))
        if user_id is None and not self._told_no_user:
            self._told_no_user = True
            log.warning(
                "memory.middleware.no_user",
                hint="no langgraph_auth_user in the config and no user_id in the run's "
                "context: this agent neither reads nor stores memories",
            )
        return user_id, thread_id(config)

    async def _retrieve(self, state: RecallState, user_id: str) -> dict[str, Any]:
        found = await retrieve_recorded(self._retrieval, state, user_id)
        return {"retrieved_memories": found}

    async def _store(self, state: RecallState, user_id: str, thread: str | None) -> None:
        with structlog.contextvars.bound_contextvars(
            user_id=user_id, thread_id=thread, node="RecallMiddleware"
        ):
            await write_safely(self._writing, state, user_id, thread)

    async def abefore_agent(
        self, state: RecallState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Retrieve this turn's memories into state (an empty list without a user)."""
        user_id, _thread = self._user(runtime)
        if user_id is None:
            return {"retrieved_memories": []}
        return await self._retrieve(state, user_id)

    def before_agent(self, state: RecallState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """`abefore_agent` for a sync agent, on recall's own loop."""
        user_id, _thread = self._user(runtime)
        if user_id is None:
            return {"retrieved_memories": []}
        return run_or(
            lambda: self._retrieve(state, user_id),
            lambda: {"retrieved_memories": []},
            event="memory.retrieve.error",
            loop=self._home,
        )

    def _with_memories(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        memories = request.state.get("retrieved_memories")
        if not isinstance(memories, list) or not memories:
            return request
        block = self.template.replace("{memories}", render_memories(memories))
        system = request.system_message
        if system is None:
            return request.override(system_message=SystemMessage(block))
        if isinstance(system.content, str):
            content: Any = f"{system.content}\n\n{block}" if system.content else block
        else:
            content = [*system.content, {"type": "text", "text": block}]
        # the agent's own message with the block added: its id, name and kwargs kept
        return request.override(system_message=system.model_copy(update={"content": content}))

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        """The model called with this turn's memories in its system prompt."""
        return handler(self._with_memories(request))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        """The model called with this turn's memories in its system prompt."""
        return await handler(self._with_memories(request))

    async def aafter_agent(
        self, state: RecallState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Store the turn (the latest user message and the agent's final reply)."""
        user_id, thread = self._user(runtime)
        if user_id is not None:
            await self._store(state, user_id, thread)
        return None

    def after_agent(self, state: RecallState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """`aafter_agent` for a sync agent, on recall's own loop."""
        user_id, thread = self._user(runtime)
        if user_id is None:
            return None
        run_or(
            lambda: self._store(state, user_id, thread),
            lambda: None,
            event="memory.write.error",
            loop=self._home,
        )
        return None


def _config() -> RunnableConfig:
    try:
        return get_config()
    except RuntimeError:  # called outside a run
        return {}
