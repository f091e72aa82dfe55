"""The options several commands take (`--user`, `--json`, `--limit`, `--threshold`,
`--mode`), with the settings' defaults in their help. A search option left out stays None: the
store fills it in (docs/decisions/0033-the-store-decides.md)."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

import typer

from recall.config import RETRIEVAL_MODES, RetrievalMode, Settings, parse_mode

__all__ = [
    "JsonOpt",
    "ModeOpt",
    "ThresholdOpt",
    "UserOpt",
    "check_mode",
    "limit_option",
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


def check_mode(value: str | None) -> RetrievalMode | None:
    """Check `--mode` (`recall.config.parse_mode`), so a wrong one is a usage error before the
    store opens.

    Raises:
        typer.BadParameter: not a mode (a usage error, exit status 2).
    """
    return None if value is None else parse_mode(value, typer.BadParameter, "")


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
        help=f"{', '.join(RETRIEVAL_MODES)} ({_setting_default('mode')}).",
    ),
]
