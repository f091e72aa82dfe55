"""Custom auth for the LangGraph server: bearer tokens mapped to user ids.

Tokens come from `Settings.auth_tokens` (`RECALL_AUTH_TOKENS`, "token:user,token:user", read
at each request so a restart is not needed to rotate them); `make run` sets demo ones.
Threads are owned by the user who created them, so no user reads another's threads.
"""

from __future__ import annotations

from typing import Any

from langgraph_sdk import Auth

from recall.config import Settings

__all__ = ["auth", "parse_tokens"]

auth = Auth()


def parse_tokens(raw: str | None) -> dict[str, str]:
    """Parse "token:user,token:user" into {token: user}; malformed pairs are ignored."""
    tokens: dict[str, str] = {}
    for pair in (raw or "").split(","):
        token, sep, user = pair.strip().partition(":")
        if sep and token.strip() and user.strip():
            tokens[token.strip()] = user.strip()
    return tokens


@auth.authenticate
async def authenticate(authorization: str | None) -> Auth.types.MinimalUserDict:
    """Map `Authorization: Bearer <token>` to its user, or refuse the request with 401."""
    scheme, _, token = (authorization or "").partition(" ")
    users = parse_tokens(Settings.from_env().auth_tokens)
    if scheme.lower() != "bearer" or token not in users:
        raise Auth.exceptions.HTTPException(status_code=401, detail="invalid or missing token")
    return {"identity": users[token]}


@auth.on.threads
async def owner_only(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str]:
    """Stamp new threads with their owner and filter every thread access (runs included)."""
    owner = {"owner": ctx.user.identity}
    if isinstance(value, dict):
        metadata = value.get("metadata")
        if isinstance(metadata, dict):
            metadata.update(owner)  # in place: the server keeps its own reference to it
        else:
            value["metadata"] = dict(owner)
    return owner
