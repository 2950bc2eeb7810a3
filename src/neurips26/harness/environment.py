"""What a result was measured on: versions, threads, machine."""

from __future__ import annotations

import os
import platform
import sys
from importlib import metadata
from typing import Any

_PACKAGES = ("numpy", "scipy", "scikit-learn", "pot", "torch", "matplotlib", "neurips26")


def capture_environment() -> dict[str, Any]:
    """Versions of the core packages, thread settings and the machine, for a result's ``environment``."""
    versions: dict[str, str | None] = {}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    threads: dict[str, Any] = {"cpu_count": os.cpu_count()}
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        if var in os.environ:
            threads[var] = os.environ[var]
    try:
        from threadpoolctl import threadpool_info

        threads["blas"] = [
            {"api": p.get("internal_api"), "num_threads": p.get("num_threads")} for p in threadpool_info()
        ]
    except Exception:  # threadpoolctl is a scikit-learn dependency; tolerate its absence
        pass
    if "torch" in sys.modules:
        threads["torch"] = sys.modules["torch"].get_num_threads()
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "packages": versions,
        "threads": threads,
    }
