"""The `recall` command. Top floor: may import anything below; nothing in `recall` imports it."""

from recall.cli.commands import app, main

__all__ = ["app", "main"]
