"""The digest's "real-world" degradation chain, its noiseless mean, and the Frechet distance of features.

``degrade``: Gaussian blur (sigma ~ U[0.3, 1.2] per image) -> ``scale`` x average pooling -> Gaussian noise
(std ~ U[0, 0.1] per image) -> quantisation to ``levels`` evenly spaced values in ``[-1, 1]``.
``degrade_mean``: the same blur at the mean sigma and the pooling, no noise or quantisation (the LR-consistency
metric ``RMSE(degrade_mean(SR), LR)`` compares with it).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import linalg
from scipy.ndimage import gaussian_filter

from ..modules import check_positive_int

__all__ = ["degrade", "degrade_mean", "frechet_distance"]


def _images(x: Any, name: str) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 4 or a.size == 0:
        raise ValueError(f"{name} must be a non-empty (n, C, H, W) array, got shape {a.shape}")
    if not np.isfinite(a).all():
        raise ValueError(f"{name} contains NaN or inf values")
    return a


def _blur_pool(x: np.ndarray, sigmas: np.ndarray, scale: int) -> np.ndarray:
    n, C, H, W = x.shape
    if H % scale or W % scale:
        raise ValueError(f"image size ({H}, {W}) must be a multiple of scale={scale}")
    blurred = np.stack(
        [gaussian_filter(x[i], sigma=(0, sigmas[i], sigmas[i]), mode="reflect") for i in range(n)]
    )
    return blurred.reshape(n, C, H // scale, scale, W // scale, scale).mean(axis=(3, 5))


def degrade(
    hr: Any,
    rng: np.random.Generator | int = 0,
    scale: int = 2,
    sigma_range: tuple[float, float] = (0.3, 1.2),
    noise_range: tuple[float, float] = (0.0, 0.1),
    levels: int = 4,
) -> np.ndarray:
    """LR images ``(n, C, H/scale, W/scale)`` from HR ``(n, C, H, W)`` in ``[-1, 1]`` (float32)."""
    x = _images(hr, "hr")
    scale, levels = check_positive_int(scale, "scale"), check_positive_int(levels, "levels", 2)
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    n = len(x)
    lr = _blur_pool(x, rng.uniform(*sigma_range, n), scale)
    lr = lr + rng.uniform(*noise_range, n)[:, None, None, None] * rng.standard_normal(lr.shape)
    step = 2.0 / (levels - 1)
    lr = np.clip(np.round((np.clip(lr, -1, 1) + 1) / step) * step - 1, -1, 1)
    return lr.astype(np.float32)


def degrade_mean(hr: Any, scale: int = 2, sigma: float = 0.75) -> np.ndarray:
    """The chain's deterministic part at the mean blur: blur(sigma) -> ``scale`` x average pooling."""
    x = _images(hr, "hr")
    return _blur_pool(x, np.full(len(x), float(sigma)), check_positive_int(scale, "scale")).astype(np.float32)


def frechet_distance(features_a: Any, features_b: Any) -> float:
    """``||mu_a - mu_b||^2 + tr(S_a + S_b - 2 (S_a S_b)^{1/2})`` of two feature samples ``(n, d)`` (FID's formula)."""
    a, b = np.asarray(features_a, np.float64), np.asarray(features_b, np.float64)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1] or min(len(a), len(b)) < 2:
        raise ValueError(f"features must be (n >= 2, d) with the same d, got {a.shape} and {b.shape}")
    mu_a, mu_b = a.mean(0), b.mean(0)
    s_a, s_b = np.atleast_2d(np.cov(a, rowvar=False)), np.atleast_2d(np.cov(b, rowvar=False))
    covmean = linalg.sqrtm(s_a @ s_b)
    covmean = np.real(covmean)
    return float(np.sum((mu_a - mu_b) ** 2) + np.trace(s_a + s_b - 2 * covmean))
