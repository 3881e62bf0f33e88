"""The `diagym` command line: one module per command over library code (analysis/cli/)."""

from diagym.analysis.cli.main import main

__all__ = ["main"]
