"""neurips26: tested, CPU-runnable reference implementations of NeurIPS 2026 methods, each with a
reproduction experiment and an honest verdict (``neurips26 list`` on the command line)."""

from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("neurips26")
except _metadata.PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"
