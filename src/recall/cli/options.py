"""The options several commands take (`--user`, `--json`, `--limit`, `--threshold`,
`--mode`), with the settings' defaults in their help, and the search options filled in."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, NamedTuple, cast

import typer

from recall.config import RETRIEVAL_MODES, RetrievalMode, Settings

__all__ = [
    "JsonOpt",
    "ModeOpt",
    "Retrieval",
    "ThresholdOpt",
    "UserOpt",
    "check_mode",
    "limit_option",
    "retrieval",
]


def _setting_default(name: str) -> str:
    # read from the dataclass, not the environment: help text is built at import
    default = next(f.default for f in dataclasses.fields(Settings) if f.name == name)
    return f"default: RECALL_{name.upper()}, else {default}"


def limit_option(maximum: int) -> Any:
    """The `--limit` option (1 to `maximum`; None: `Settings.max_memories`)."""
    return typer.Option(
        min=1, max=maximum, help=f"Memories returned at most ({_setting_default('max_memories')})."
    )


def check_mode(value: str | None) -> str | None:
    """Check `--mode` against the retrieval modes (`recall.config.RETRIEVAL_MODES`).

    Raises:
        typer.BadParameter: not a mode (a usage error, exit status 2).
    """
    if value is not None and value not in RETRIEVAL_MODES:
        raise typer.BadParameter(f"must be one of {', '.join(RETRIEVAL_MODES)}, not {value!r}")
    return value


UserOpt = Annotated[str, typer.Option("--user", "-u", help="The user whose memories to use.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
ThresholdOpt = Annotated[
    float | None,
    typer.Option(
        min=0.0,
        max=1.0,
        help="Least similarity, or relevance in hybrid mode; unused in keyword mode "
        f"({_setting_default('similarity_threshold')}).",
    ),
]
ModeOpt = Annotated[
    str | None,
    typer.Option(
        callback=check_mode,
        help=f"{', '.join(RETRIEVAL_MODES)} ({_setting_default('retrieval_mode')}).",
    ),
]


class Retrieval(NamedTuple):
    """How to search: the options given, the settings for the others."""

    limit: int
    threshold: float
    mode: RetrievalMode


def retrieval(
    settings: Settings, limit: int | None, threshold: float | None, mode: str | None
) -> Retrieval:
    """Fill the search options left out (None) from `settings`."""
    return Retrieval(
        limit=settings.max_memories if limit is None else limit,
        threshold=settings.similarity_threshold if threshold is None else threshold,
        # a given mode passed `check_mode`; the setting's was checked by Settings
        mode=settings.retrieval_mode if mode is None else cast(RetrievalMode, mode),
    )
