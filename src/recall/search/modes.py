"""The retrieval modes, as the search code names them. They are defined once, in
`recall.config` (a setting chooses the default mode), and every entry point (store, nodes,
tool, CLI) checks a mode against `MODES`."""

from __future__ import annotations

from recall.config import RETRIEVAL_MODES as MODES
from recall.config import RetrievalMode as Mode

__all__ = ["MODES", "Mode"]
