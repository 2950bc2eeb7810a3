"""Known additive measurement-error laws, parameterised by their standard deviation.

Laplace noise with standard deviation ``sd`` has scale ``b = sd / sqrt(2)`` (the digest's pitfall: mixing the two
silently over-deconvolves). Noise is independent across coordinates.
"""

from __future__ import annotations

import math

import numpy as np
import torch

NOISES = ("gaussian", "laplace")


def sample_noise(sd: torch.Tensor, family: str, generator: torch.Generator) -> torch.Tensor:
    """Draw ``eps`` with per-entry standard deviation ``sd`` (a tensor of the output shape)."""
    if family == "gaussian":
        return sd * torch.randn(sd.shape, generator=generator, dtype=sd.dtype)
    # Laplace(0, b) by inversion: -b sign(u) log(1 - 2|u|), u ~ U(-1/2, 1/2)
    u = torch.rand(sd.shape, generator=generator, dtype=sd.dtype) - 0.5
    b = sd / math.sqrt(2.0)
    return -b * torch.sign(u) * torch.log1p(-2.0 * u.abs().clamp_max(0.5 - 1e-12))


def noise_logpdf(eps: np.ndarray, sd: np.ndarray, family: str) -> np.ndarray:
    """Log density of the noise at ``eps`` (summed over the last axis), ``sd > 0`` broadcastable."""
    if family == "gaussian":
        return (-0.5 * (eps / sd) ** 2 - np.log(sd) - 0.5 * np.log(2 * np.pi)).sum(-1)
    b = sd / np.sqrt(2.0)
    return (-np.abs(eps) / b - np.log(2.0 * b)).sum(-1)


def sample_noise_np(sd: np.ndarray, family: str, rng: np.random.Generator) -> np.ndarray:
    """NumPy twin of :func:`sample_noise` for data generation and importance sampling."""
    if family == "gaussian":
        return sd * rng.standard_normal(np.shape(sd))
    return rng.laplace(0.0, 1.0, np.shape(sd)) * (sd / np.sqrt(2.0))
