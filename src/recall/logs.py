"""Logging set-up: structlog, configured once and only when nobody configured it before."""

from __future__ import annotations

import logging
import os
import sys

import structlog

__all__ = ["configure_logging"]


def configure_logging(level: str | None = None, *, json: bool | None = None) -> bool:
    """Configure structlog unless it already is (the LangGraph server configures it itself).

    Args:
        level: minimum level name; `RECALL_LOG_LEVEL` or "INFO" when None.
        json: JSON lines instead of console output; by default JSON when stderr is not a TTY.

    Returns:
        Whether this call configured structlog.
    """
    if structlog.is_configured():
        return False
    name = (level or os.environ.get("RECALL_LOG_LEVEL") or "INFO").upper()
    numeric = logging.getLevelNamesMapping().get(name, logging.INFO)
    as_json = (not sys.stderr.isatty()) if json is None else json
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer() if as_json else structlog.dev.ConsoleRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    return True
