"""Auth for the example server: bearer tokens mapped to user ids, and a rule for every
resource the LangGraph server exposes (docs/security.md lists them).

Tokens come from `Settings.auth_tokens` (`RECALL_AUTH_TOKENS`, "token:user,token:user", read
once per process with every other setting, `recall.config.process_settings`: rotating them
means restarting the server, whose environment nothing else can change); `make run` sets demo
ones. Operators (`Settings.operators`, `RECALL_OPERATORS`) are the user ids that may change
assistants and crons. The rules:
- threads (and their runs): owned by their creator; every access is filtered by owner;
- assistants: every user may read and search them (and run them on their own threads); only
  an operator may create, update or delete one;
- crons: operators only (the example graph schedules nothing);
- store: a user reaches only namespaces whose first label is their own id (a search or a
  namespace listing without a prefix is narrowed to it);
- anything else: refused (a resource the server adds later is closed until a rule opens it).
"""

from __future__ import annotations

from typing import Any

from langgraph_sdk import Auth

from recall.config import Settings, process_settings

__all__ = ["auth", "parse_tokens", "user_for"]

auth = Auth()


def parse_tokens(raw: str | None) -> dict[str, str]:
    """Parse "token:user,token:user" into {token: user}; malformed pairs are ignored."""
    tokens: dict[str, str] = {}
    for pair in (raw or "").split(","):
        token, sep, user = pair.strip().partition(":")
        if sep and token.strip() and user.strip():
            tokens[token.strip()] = user.strip()
    return tokens


def operators(settings: Settings) -> frozenset[str]:
    """The user ids in `settings.operators` ("alice,ops")."""
    return frozenset(u.strip() for u in (settings.operators or "").split(",") if u.strip())


def _forbidden(detail: str) -> Auth.exceptions.HTTPException:
    return Auth.exceptions.HTTPException(status_code=403, detail=detail)


def user_for(authorization: str | None) -> str | None:
    """The user an `Authorization: Bearer <token>` header names (the process's tokens), or None."""
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not token:
        return None
    return parse_tokens(process_settings().auth_tokens).get(token)


@auth.authenticate
async def authenticate(authorization: str | None) -> Auth.types.MinimalUserDict:
    """Map `Authorization: Bearer <token>` to its user, or refuse the request with 401."""
    user = user_for(authorization)
    if user is None:
        raise Auth.exceptions.HTTPException(status_code=401, detail="invalid or missing token")
    return {"identity": user}


@auth.on
async def closed_by_default(ctx: Auth.types.AuthContext, value: Any) -> bool:
    """Refuse what no rule below opens."""
    raise _forbidden(f"{ctx.resource}.{ctx.action} is not allowed on this server")


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


@auth.on.assistants.read
async def read_assistants(ctx: Auth.types.AuthContext, value: Any) -> bool:
    """Every user may read an assistant (the shared graphs)."""
    return True


@auth.on.assistants.search
async def search_assistants(ctx: Auth.types.AuthContext, value: Any) -> bool:
    """Every user may list the assistants."""
    return True


@auth.on(resources="assistants", actions=["create", "update", "delete"])
async def change_assistants(ctx: Auth.types.AuthContext, value: Any) -> bool:
    """Creating, changing or deleting an assistant is for operators."""
    return operators_only(ctx)


@auth.on(resources="crons")
async def crons(ctx: Auth.types.AuthContext, value: Any) -> bool:
    """Every cron action is for operators."""
    return operators_only(ctx)


def operators_only(ctx: Auth.types.AuthContext) -> bool:
    """Allow an operator (`Settings.operators`); refuse anyone else with 403."""
    if ctx.user.identity not in operators(process_settings()):
        raise _forbidden(f"only an operator may {ctx.action} {ctx.resource}")
    return True


@auth.on.store
async def own_namespace(ctx: Auth.types.AuthContext, value: Any) -> bool:
    """A user reaches only namespaces that start with their id; an open prefix (search or
    listing with none) is narrowed to it."""
    identity = ctx.user.identity
    namespace = tuple(value.get("namespace") or ()) if isinstance(value, dict) else ()
    if not namespace and ctx.action in ("search", "list_namespaces"):
        value["namespace"] = (identity,)
        return True
    if not namespace or namespace[0] != identity:
        raise _forbidden("a user may only reach store namespaces that start with their id")
    return True
