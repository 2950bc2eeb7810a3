"""Synthetic phantom volumes for the MedVTok checks: a body ellipsoid, 1-4 organ ellipsoids, an optional bright
lesion, a smooth intensity field and Gaussian noise. Returns the noisy volumes, the clean ones (the target of the
slice-differential term and of ISDE) and labels (lesion present, organ count)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.ndimage import zoom

from ...vision.modules import check_positive_int

__all__ = ["Phantoms", "make_phantoms"]


@dataclass
class Phantoms:
    volumes: np.ndarray  # (n, 1, D, H, W) float32 in about [-1, 1]
    clean: np.ndarray
    lesion: np.ndarray  # (n,) 0/1
    organs: np.ndarray  # (n,) 1..4


def _ellipsoid(zz, yy, xx, c, r):
    return ((zz - c[0]) / r[0]) ** 2 + ((yy - c[1]) / r[1]) ** 2 + ((xx - c[2]) / r[2]) ** 2 <= 1.0


def make_phantoms(n: int, slices: int = 8, size: int = 16, noise: float = 0.05, seed: int = 0) -> Phantoms:
    """``n`` phantoms of ``slices x size x size`` voxels (see the module docstring)."""
    n, D, S = (
        check_positive_int(n, "n"),
        check_positive_int(slices, "slices", 2),
        check_positive_int(size, "size", 8),
    )
    if not 0 <= noise <= 0.5:
        raise ValueError(f"noise must be in [0, 0.5], got {noise}")
    rng = np.random.default_rng(seed)
    zz, yy, xx = np.meshgrid(
        np.linspace(-1, 1, D), np.linspace(-1, 1, S), np.linspace(-1, 1, S), indexing="ij"
    )
    clean = np.empty((n, 1, D, S, S), np.float32)
    lesion = rng.integers(0, 2, n)
    organs = rng.integers(1, 5, n)
    for i in range(n):
        v = np.full((D, S, S), -1.0)
        body = _ellipsoid(
            zz, yy, xx, rng.uniform(-0.1, 0.1, 3), rng.uniform([0.9, 0.6, 0.6], [1.2, 0.9, 0.9])
        )
        field = zoom(rng.uniform(-1, 1, (2, 3, 3)), (D / 2, S / 3, S / 3), order=1)
        v[body] = -0.3 + 0.15 * field[body]
        for _ in range(organs[i]):
            organ = _ellipsoid(
                zz, yy, xx, rng.uniform(-0.4, 0.4, 3), rng.uniform([0.25, 0.15, 0.15], [0.6, 0.35, 0.35])
            )
            v[organ & body] = rng.uniform(0.0, 0.5)
        if lesion[i]:
            r = rng.uniform(0.12, 0.2, 3)
            r[0] = max(r[0], 2.0 / (D - 1))  # one slice spacing: the lesion always shows in some slice
            v[_ellipsoid(zz, yy, xx, rng.uniform(-0.4, 0.4, 3), r)] = 0.95
        clean[i, 0] = v
    volumes = np.clip(clean + noise * rng.standard_normal(clean.shape), -1, 1).astype(np.float32)
    return Phantoms(volumes, clean, lesion, organs)
