"""`python -m recall` runs the `recall` command."""

from recall.cli import main

main()
