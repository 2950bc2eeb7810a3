"""Synthetic data for the MedVTok checks.

- :func:`make_phantoms`, the "3-D modality": a body ellipsoid, 1-4 organ ellipsoids, an optional bright lesion, a
  smooth intensity field and Gaussian noise; the noisy volumes, the clean ones (the target of the
  slice-differential term and of ISDE) and labels (lesion present, organ count).
- :func:`make_textured_disks`, the second 2-D modality: a disk filled with an oriented grating (the label is its
  orientation, one of ``n_textures`` evenly spaced angles) of random frequency, phase, contrast and position.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.ndimage import zoom

from ...vision.modules import check_positive_int

__all__ = ["Phantoms", "make_phantoms", "make_textured_disks"]


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


def make_textured_disks(
    n: int, size: int = 16, n_textures: int = 4, noise: float = 0.05, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """``n`` images ``(n, 1, size, size)`` in about [-1, 1] and their texture labels ``(n,)`` in
    ``0..n_textures-1``: a grating at angle ``pi * label / n_textures`` inside a disk on a dark background."""
    n, S = check_positive_int(n, "n"), check_positive_int(size, "size", 8)
    n_textures = check_positive_int(n_textures, "n_textures", 2)
    if not 0 <= noise <= 0.5:
        raise ValueError(f"noise must be in [0, 0.5], got {noise}")
    rng = np.random.default_rng(seed)
    yy, xx = np.meshgrid(np.arange(S) - (S - 1) / 2, np.arange(S) - (S - 1) / 2, indexing="ij")
    labels = rng.integers(0, n_textures, n)
    theta = np.pi * labels / n_textures
    freq = rng.uniform(0.12, 0.3, n)  # cycles per pixel: 2-5 periods across the image
    phase = rng.uniform(0, 2 * np.pi, n)
    u = np.cos(theta)[:, None, None] * xx + np.sin(theta)[:, None, None] * yy
    grating = np.sin(2 * np.pi * freq[:, None, None] * u + phase[:, None, None])
    centre = rng.uniform(-0.1, 0.1, (n, 2)) * S
    radius = rng.uniform(0.3, 0.45, n) * S
    inside = (yy - centre[:, 0, None, None]) ** 2 + (xx - centre[:, 1, None, None]) ** 2 <= radius[
        :, None, None
    ] ** 2
    level, contrast = rng.uniform(-0.2, 0.2, n), rng.uniform(0.3, 0.6, n)
    img = np.where(inside, level[:, None, None] + contrast[:, None, None] * grating, -1.0)
    img = np.clip(img + noise * rng.standard_normal(img.shape), -1, 1)
    return img[:, None].astype(np.float32), labels
