"""Namespaces: LangGraph's rules for their labels, their stored form, and the matching that
`list_namespaces` does (prefix and suffix conditions with `*` wildcards, depth, paging).

A namespace is stored as its labels joined by '.', which no label may contain, so the stored
form is unambiguous and a prefix is a key range in PostgreSQL (`recall.db.items.scope`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    SearchOp,
    validate_op_namespace,
)

__all__ = ["join", "list_matching", "literal_prefix", "split", "validate_op"]

SEPARATOR = "."


def join(namespace: Sequence[str]) -> str:
    """The stored form of a (validated) namespace."""
    return SEPARATOR.join(namespace)


def split(stored: str) -> tuple[str, ...]:
    """The namespace a stored form stands for."""
    return tuple(stored.split(SEPARATOR))


def validate_op(op: Op) -> None:
    """Check an op's namespace as `BaseStore`'s own methods do, for ops given to `batch`
    directly too: labels are non-empty text without '.' or NUL; a put (not a delete) also
    needs a non-empty namespace whose root is not "langgraph".

    Raises:
        InvalidNamespaceError: the namespace breaks one of these rules.
        TypeError: `op` is not one of LangGraph's four operations.
    """
    if not isinstance(op, GetOp | PutOp | SearchOp | ListNamespacesOp):
        raise TypeError(f"RecallStore cannot run {type(op).__name__}: not a store operation")
    if isinstance(op, GetOp | PutOp):
        _check_shape(op.namespace)
    elif isinstance(op, SearchOp):
        _check_shape(op.namespace_prefix)
    validate_op_namespace(op)
    if isinstance(op, PutOp) and op.value is not None:
        if not op.namespace:
            raise InvalidNamespaceError("Namespace cannot be empty.")
        if op.namespace[0] == "langgraph":
            raise InvalidNamespaceError(
                f'Root label for namespace cannot be "langgraph". Got: {op.namespace}'
            )


def _check_shape(namespace: object) -> None:
    if isinstance(namespace, str) or not isinstance(namespace, Sequence):
        raise InvalidNamespaceError(f"a namespace is a tuple of strings, not {namespace!r}")


def literal_prefix(conditions: Iterable[MatchCondition]) -> tuple[str, ...]:
    """The labels every match must start with: the leading labels of the first prefix
    condition, up to its first wildcard (what PostgreSQL can narrow by key range)."""
    for condition in conditions:
        if condition.match_type == "prefix":
            labels: list[str] = []
            for label in condition.path:
                if label == "*":
                    break
                labels.append(label)
            return tuple(labels)
    return ()


def _matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(namespace[: len(path)], path, strict=True)
    elif condition.match_type == "suffix":
        pairs = zip(namespace[len(namespace) - len(path) :], path, strict=True)
    else:
        raise ValueError(f"unknown namespace match type {condition.match_type!r}")
    return all(p == "*" or n == p for n, p in pairs)


def list_matching(stored: Iterable[str], op: ListNamespacesOp) -> list[tuple[str, ...]]:
    """The namespaces among `stored` that meet every condition of `op`, cut to
    `op.max_depth` (duplicates merged), sorted, then paged by `op.offset` and `op.limit`."""
    conditions = tuple(op.match_conditions or ())
    found: set[tuple[str, ...]] = set()
    for joined in stored:
        namespace = split(joined)
        if all(_matches(c, namespace) for c in conditions):
            found.add(namespace if op.max_depth is None else namespace[: op.max_depth])
    ordered = sorted(found)
    return ordered[op.offset : op.offset + op.limit]
