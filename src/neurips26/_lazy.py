"""Lazy re-exports for field packages, so ``import neurips26.rl`` stays cheap (no torch, no cvxpy)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def attach(
    package: str, exports: dict[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """Return ``__getattr__``, ``__dir__`` and ``__all__`` for ``package``.

    ``exports`` maps a public name to the relative module that defines it, e.g.
    ``{"MaxSketch": ".maxsketch"}``; the module is imported on first access.
    """

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(exports[name], package)
        value = getattr(module, name)
        globals_ = importlib.import_module(package).__dict__
        globals_[name] = value  # cache: later lookups skip __getattr__
        return value

    def __dir__() -> list[str]:
        return sorted(exports)

    return __getattr__, __dir__, sorted(exports)
