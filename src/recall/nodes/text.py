"""How a memory reads as text, for a prompt, a node's output or the agent's tool."""

from __future__ import annotations

from recall.memory import Memory

__all__ = ["format_memory", "memory_text"]


def memory_text(memory: Memory) -> str:
    """A memory as one text: the turn's two sides, or a note's or summary's text."""
    if memory.ai_response:
        return f"{memory.user_message}\n{memory.ai_response}"
    return memory.user_message


def format_memory(index: int, memory: Memory) -> str:
    """One search result as the agent reads it: rank, date, conversation, score, text."""
    where = memory.metadata.get("source") or memory.conversation_id or "no conversation"
    score = "" if memory.score is None else f" · score {memory.score:.2f}"
    header = f"[{index}] {memory.created_at:%Y-%m-%d} · {where}{score}"
    if memory.kind == "turn":
        return f"{header}\nUser: {memory.user_message}\nAssistant: {memory.ai_response}"
    return f"{header}\n{memory.user_message}"
