"""Logging set-up: structlog, configured once and only when nobody configured it before."""

from __future__ import annotations

import logging
import sys

import structlog

__all__ = ["configure_logging"]


def configure_logging(level: str | None = None, *, json: bool | None = None) -> bool:
    """Configure structlog, and route stdlib logging through it, unless structlog is already
    configured (the LangGraph server configures it itself and adds run and thread ids).

    Events carry the contextvars the nodes bind (user_id, thread_id, node).

    Args:
        level: minimum level name (`Settings.log_level`); "INFO" when None.
        json: JSON lines instead of console output; by default JSON unless stderr is a TTY.

    Returns:
        Whether this call configured logging.
    """
    if structlog.is_configured():
        return False
    name = (level or "INFO").upper()
    numeric = logging.getLevelNamesMapping().get(name, logging.INFO)
    as_json = (not sys.stderr.isatty()) if json is None else json
    shared: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer() if as_json else structlog.dev.ConsoleRenderer()
    )
    structlog.configure(
        processors=[
            *shared,
            structlog.processors.format_exc_info,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.stdlib.LoggerFactory(),
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
            foreign_pre_chain=shared,  # stdlib records (psycopg, ...) get the same fields
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(numeric)
    return True
