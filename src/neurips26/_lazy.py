"""Lazy re-exports for field packages, so ``import neurips26.rl`` stays cheap (no torch, no cvxpy).

A paper's public names are written once: the ``__all__`` list of its package's ``__init__.py``. Everything else
derives them without importing the paper: :func:`public_names` reads a literal ``__all__`` with :mod:`ast`,
:func:`field_exports` builds a field's ``{name: ".package"}`` map from its paper packages (and from the shared
modules the field names), and :func:`attach` turns that map into the field's lazy ``__getattr__``.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any


class PublicNamesError(ValueError):
    """A module's ``__all__`` is missing or is not a literal list of distinct strings."""


def public_names(path: str | Path) -> tuple[str, ...]:
    """The names in the literal ``__all__`` of the module file ``path``, in order; nothing is imported.

    ``__all__`` must be assigned once, at module level, to a list of string literals without repeats (so that it
    can be read without running the module); anything else raises :class:`PublicNamesError` naming the file.
    """
    path = Path(path)
    found: list[ast.expr] = []
    for node in ast.parse(path.read_text(), filename=str(path)).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            found.append(node.value)
        elif (
            isinstance(node, ast.AnnAssign | ast.AugAssign) and getattr(node.target, "id", None) == "__all__"
        ):
            raise PublicNamesError(f"{path}:{node.lineno}: write `__all__ = [...]` once, as a plain list")
    if len(found) != 1:
        raise PublicNamesError(f"{path}: expected one `__all__ = [...]` at module level, found {len(found)}")
    value = found[0]
    if not isinstance(value, ast.List) or not all(
        isinstance(e, ast.Constant) and isinstance(e.value, str) for e in value.elts
    ):
        raise PublicNamesError(f"{path}:{value.lineno}: `__all__` must be a literal list of strings")
    names = tuple(e.value for e in value.elts)  # type: ignore[attr-defined]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise PublicNamesError(f"{path}: `__all__` repeats {', '.join(repeated)}")
    return names


def field_exports(
    package: str, init_file: str | Path, modules: Iterable[str] = ()
) -> tuple[dict[str, str], dict[str, str]]:
    """The field ``package``'s lazy exports, read from its paper packages' ``__all__`` (nothing is imported).

    ``init_file`` is the field's ``__init__.py``; every sub-package beside it (a folder with an ``__init__.py``)
    is a paper package, and ``modules`` names the field's shared modules (``".transformer"``) whose ``__all__``
    is exported too. Returns ``(exports, problems)``: ``exports`` maps each public name to the relative module
    that defines it; ``problems`` maps a name (or a package) that could not be exported to why: a name in two
    sources' ``__all__`` (a clash: neither is exported, so the field never silently picks one) or an ``__all__``
    that cannot be read. The field imports anyway, so one paper's mistake does not break its neighbours;
    tests/test_public_names.py fails on any problem.
    """
    if isinstance(modules, str):
        raise TypeError(f"modules must be a tuple of module names, not the string {modules!r}")
    here = Path(init_file).resolve().parent
    sources = [
        (f".{d.name}", d / "__init__.py") for d in sorted(here.iterdir()) if (d / "__init__.py").is_file()
    ]
    sources += [(m, here / f"{m.lstrip('.')}.py") for m in modules]
    owners: dict[str, list[str]] = {}
    problems: dict[str, str] = {}
    for module, path in sources:
        try:
            names = public_names(path)
        except (OSError, SyntaxError, PublicNamesError) as exc:
            problems[module] = f"{package}{module} exports nothing: {exc}"
            continue
        for name in names:
            owners.setdefault(name, []).append(module)
    exports = {name: where[0] for name, where in owners.items() if len(where) == 1}
    for name, where in owners.items():
        if len(where) > 1:
            problems[name] = (
                f"{name!r} is public in both {' and '.join(package + w for w in where)}, so {package} exports "
                f"neither: rename one, or import it from its paper package"
            )
    return exports, problems


def attach(
    package: str, exports: dict[str, str], problems: dict[str, str] | None = None
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """Return ``__getattr__``, ``__dir__`` and ``__all__`` for ``package``.

    ``exports`` maps a public name to the relative module that defines it, e.g.
    ``{"MaxSketch": ".maxsketch"}``; the module is imported on first access. A name in ``problems`` (from
    :func:`field_exports`) raises an ``AttributeError`` that says why it is not exported.
    """
    problems = problems or {}

    def __getattr__(name: str) -> Any:
        if name not in exports:
            why = f" ({problems[name]})" if name in problems else ""
            raise AttributeError(f"module {package!r} has no attribute {name!r}{why}")
        module = importlib.import_module(exports[name], package)
        value = getattr(module, name)
        globals_ = importlib.import_module(package).__dict__
        globals_[name] = value  # cache: later lookups skip __getattr__
        return value

    def __dir__() -> list[str]:
        return sorted(exports)

    return __getattr__, __dir__, sorted(exports)
