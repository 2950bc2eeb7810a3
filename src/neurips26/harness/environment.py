"""What a result was measured on: code version, package versions, threads in effect, machine, command line."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

_CORE = ("numpy", "scipy", "scikit-learn", "POT", "matplotlib", "neurips26")


def _version() -> str | None:
    try:
        return metadata.version("neurips26")
    except metadata.PackageNotFoundError:
        return None


@lru_cache(maxsize=1)
def git_state() -> dict[str, Any]:
    """The code a run used: the package version, and the commit of the checkout it runs from with whether that
    had local changes, untracked files included (an experiment not yet added to git is a change). Installed
    from a wheel there is no checkout: commit and dirty are None and the version is what identifies the code.
    """
    here = Path(__file__).resolve()
    return code_state(here.parents[3] if here.parents[2].name == "src" else None)


def code_state(root: Path | None) -> dict[str, Any]:
    """:func:`git_state` for the checkout at ``root`` (None: not run from a checkout)."""
    if root is None or not (root / ".git").exists():
        return {"version": _version(), "commit": None, "dirty": None}

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10, check=True
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip()

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain")
    return {"version": _version(), "commit": commit, "dirty": None if status is None else bool(status)}


def package_versions(extra_modules: bool = True) -> dict[str, str | None]:
    """Versions of the core packages and of every distribution whose modules this process has imported."""
    names = set(_CORE)
    if extra_modules:
        dists = metadata.packages_distributions()
        for mod in list(sys.modules):
            top = mod.partition(".")[0]
            if top.startswith("_"):
                continue
            names.update(dists.get(top, ()))
    versions: dict[str, str | None] = {}
    for name in sorted(names, key=str.lower):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def thread_state() -> dict[str, Any]:
    """The thread counts in effect now: BLAS/OpenMP pools (threadpoolctl), torch, and the env variables."""
    threads: dict[str, Any] = {"cpu_count": os.cpu_count()}
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        if var in os.environ:
            threads[var] = os.environ[var]
    try:
        from threadpoolctl import threadpool_info

        threads["blas"] = [
            {"api": p.get("internal_api"), "num_threads": p.get("num_threads")} for p in threadpool_info()
        ]
    except Exception:  # threadpoolctl missing or a pool that cannot be inspected: record what we can
        pass
    if "torch" in sys.modules:
        threads["torch"] = sys.modules["torch"].get_num_threads()
    return threads


def capture_environment(threads: dict[str, Any] | None = None) -> dict[str, Any]:
    """Versions, thread settings (``threads`` as measured inside the run, when given) and the machine."""
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "git": git_state(),
        "argv": list(sys.argv),
        "packages": package_versions(),
        "threads": threads if threads is not None else thread_state(),
    }
