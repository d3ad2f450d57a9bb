"""The `platonic` command line: `app` (cli.app) registers one module per command group."""

from .app import app

__all__ = ["app"]
