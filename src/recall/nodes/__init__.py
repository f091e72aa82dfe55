"""LangGraph nodes and the agent tool: what a graph adds to use its memory.

Owns `retrieve_memories` (at START) and `store_memories` (after the reply) with their
factories, the durable `TurnWriter`, the context nodes, the keyword-search node and the
`memory_search` tool. May import `recall.creation`, `recall.store` and the floors below.
"""

from recall.nodes.context import create_chat_summary_node, create_recent_memories_node
from recall.nodes.keyword import create_keyword_search_node
from recall.nodes.memory_node import MemoryNode
from recall.nodes.retrieve import (
    MAX_MEMORY_TEXT,
    RetrievedMemory,
    create_retrieve_memories_node,
    retrieve_memories,
    to_state_dict,
)
from recall.nodes.store_memories import create_store_memories_node, store_memories
from recall.nodes.tool import create_memory_search_tool

__all__ = [
    "MAX_MEMORY_TEXT",
    "MemoryNode",
    "RetrievedMemory",
    "create_chat_summary_node",
    "create_keyword_search_node",
    "create_memory_search_tool",
    "create_recent_memories_node",
    "create_retrieve_memories_node",
    "create_store_memories_node",
    "retrieve_memories",
    "store_memories",
    "to_state_dict",
]
