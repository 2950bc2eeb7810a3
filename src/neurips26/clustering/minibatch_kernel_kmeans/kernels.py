"""Kernel functions for kernel k-means: RBF and Laplacian with a median-heuristic bandwidth, or a callable."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np
from sklearn.metrics.pairwise import euclidean_distances, laplacian_kernel, manhattan_distances, rbf_kernel

KernelFn = Callable[[np.ndarray, np.ndarray], np.ndarray]
KERNELS = ("rbf", "laplacian")


def median_heuristic_gamma(
    X: np.ndarray, kernel: str = "rbf", max_points: int = 1000, random_state: int | None = 0
) -> float:
    """Bandwidth from the median heuristic: ``gamma = 1 / median(d(x, y))`` over distinct pairs.

    ``d`` is the squared Euclidean distance for ``"rbf"`` (``k = exp(-gamma ||x-y||^2)``) and the L1 distance
    for ``"laplacian"`` (``k = exp(-gamma ||x-y||_1)``). At most ``max_points`` points (a seeded uniform
    subsample) are used, so the cost does not grow with n.
    """
    rng = np.random.default_rng(random_state)
    if X.shape[0] > max_points:
        X = X[rng.choice(X.shape[0], max_points, replace=False)]
    if kernel == "rbf":
        d = euclidean_distances(X, squared=True)
    elif kernel == "laplacian":
        d = manhattan_distances(X)
    else:
        raise ValueError(f"kernel must be one of {KERNELS} for the median heuristic, got {kernel!r}")
    med = float(np.median(d[np.triu_indices_from(d, k=1)])) if X.shape[0] > 1 else 0.0
    return 1.0 / med if med > 0 else 1.0


def make_kernel(
    kernel: str | KernelFn, gamma: float | None, X: np.ndarray, random_state=0
) -> tuple[KernelFn, float | None]:
    """Resolve ``kernel``/``gamma`` into ``k(A, B) -> (len(A), len(B))`` and the gamma used (None for callables)."""
    if callable(kernel):
        return kernel, None
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS} or a callable k(A, B) -> array, got {kernel!r}")
    if gamma is None:
        gamma = median_heuristic_gamma(X, kernel, random_state=random_state)
    elif not (np.isfinite(gamma) and gamma > 0):
        raise ValueError(f"gamma must be a positive finite float or None, got {gamma!r}")
    g = float(gamma)
    # partial objects (not lambdas) keep fitted estimators picklable
    return partial(rbf_kernel if kernel == "rbf" else laplacian_kernel, gamma=g), g


def kernel_diagonal(kernel_fn: KernelFn, X: np.ndarray, name: str | KernelFn, chunk: int = 512) -> np.ndarray:
    """``k(x, x)`` for every row: exactly 1 for RBF/Laplacian; for a callable, the diagonals of chunked blocks."""
    if isinstance(name, str):
        return np.ones(X.shape[0])
    out = np.empty(X.shape[0])
    for start in range(0, X.shape[0], chunk):
        block = kernel_fn(X[start : start + chunk], X[start : start + chunk])
        out[start : start + chunk] = np.diag(block)
    return out
