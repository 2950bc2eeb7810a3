"""Dense-action tokenisations that NoTVLA is compared against, at a given token budget.

* ``uniform_keyframes`` + ``render_linear``: waypoints at uniformly spaced steps (same token format and
  budget as the narrative codec), linear interpolation in time, gripper switched where its linear
  interpolation crosses 1/2.
* ``DCTActionCodec``: FAST-style: each action dimension normalised to [-1, 1], orthonormal DCT-II over the
  episode, the lowest ``n_coefficients`` kept and rounded after scaling by ``gamma`` (FAST then compresses with
  BPE; at a fixed token budget we keep the coefficients instead).
* ``BinnedActionCodec``: RT-2 / OpenVLA per-step tokens, each dimension in ``n_bins`` uniform bins.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.fft import dct, idct

from .scene import _finite_array

__all__ = ["uniform_keyframes", "render_linear", "DCTActionCodec", "BinnedActionCodec"]


def _count(value, name: str, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def uniform_keyframes(n_steps: int, n_waypoints: int) -> np.ndarray:
    """``n_waypoints`` step indices spaced uniformly over ``[0, n_steps - 1]`` (endpoints included)."""
    n_steps, n_waypoints = _count(n_steps, "n_steps", 2), _count(n_waypoints, "n_waypoints", 2)
    if n_waypoints > n_steps:
        raise ValueError(f"n_waypoints must be <= n_steps ({n_steps}), got {n_waypoints}")
    return np.rint(np.linspace(0, n_steps - 1, n_waypoints)).astype(int)


def render_linear(points, gripper, steps, n_steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Dense positions (n_steps, 3) and gripper (n_steps,) by linear interpolation between samples at ``steps``."""
    p = _finite_array(points, "points", (None, 3))
    g = _finite_array(gripper, "gripper", (len(p),))
    s = _finite_array(steps, "steps", (len(p),))
    n_steps = _count(n_steps, "n_steps", 2)
    if len(p) < 2 or np.any(np.diff(s) <= 0):
        raise ValueError("steps must hold at least 2 strictly increasing sample steps")
    t = np.arange(n_steps)
    pos = np.column_stack([np.interp(t, s, p[:, j]) for j in range(3)])
    return pos, (np.interp(t, s, g) >= 0.5).astype(float)


@dataclass(frozen=True)
class DCTActionCodec:
    """FAST-style DCT tokens: ``n_coefficients`` rounded low-frequency coefficients per action dimension."""

    low: np.ndarray
    high: np.ndarray
    n_coefficients: int = 8
    gamma: float = 50.0

    def __post_init__(self) -> None:
        lo = _finite_array(self.low, "low", (None,))
        hi = _finite_array(self.high, "high", (len(lo),))
        if np.any(hi <= lo):
            raise ValueError("high must exceed low in every dimension")
        object.__setattr__(self, "low", lo)
        object.__setattr__(self, "high", hi)
        _count(self.n_coefficients, "n_coefficients")
        if not (np.isfinite(self.gamma) and self.gamma > 0):
            raise ValueError(f"gamma must be positive, got {self.gamma!r}")

    def encode(self, actions) -> np.ndarray:
        """Integer tokens (n_coefficients, D) of actions (T, D); T >= n_coefficients."""
        a = _finite_array(actions, "actions", (None, len(self.low)))
        if len(a) < self.n_coefficients:
            raise ValueError(f"actions must hold at least n_coefficients ({self.n_coefficients}) steps")
        z = 2 * (a - self.low) / (self.high - self.low) - 1
        c = dct(z, type=2, norm="ortho", axis=0)[: self.n_coefficients]
        return np.rint(c * self.gamma).astype(int)

    def decode(self, tokens, n_steps: int) -> np.ndarray:
        """Actions (n_steps, D) from tokens (n_coefficients, D), the dropped coefficients set to zero."""
        c = np.asarray(tokens)
        if c.shape != (self.n_coefficients, len(self.low)):
            raise ValueError(f"tokens must have shape {(self.n_coefficients, len(self.low))}, got {c.shape}")
        n_steps = _count(n_steps, "n_steps", self.n_coefficients)
        full = np.zeros((n_steps, len(self.low)))
        full[: self.n_coefficients] = c / self.gamma
        z = idct(full, type=2, norm="ortho", axis=0)
        return self.low + (z + 1) * (self.high - self.low) / 2


@dataclass(frozen=True)
class BinnedActionCodec:
    """Per-step tokens: every dimension of every step in ``n_bins`` uniform bins over ``[low, high]``."""

    low: np.ndarray
    high: np.ndarray
    n_bins: int = 256

    def __post_init__(self) -> None:
        lo = _finite_array(self.low, "low", (None,))
        hi = _finite_array(self.high, "high", (len(lo),))
        if np.any(hi <= lo):
            raise ValueError("high must exceed low in every dimension")
        object.__setattr__(self, "low", lo)
        object.__setattr__(self, "high", hi)
        _count(self.n_bins, "n_bins", 2)

    def encode(self, actions) -> np.ndarray:
        """Bin indices (T, D) in [0, n_bins) of actions (T, D) (values outside [low, high] are clipped)."""
        a = _finite_array(actions, "actions", (None, len(self.low)))
        z = (a - self.low) / (self.high - self.low)
        return np.clip(np.floor(z * self.n_bins), 0, self.n_bins - 1).astype(int)

    def decode(self, tokens) -> np.ndarray:
        """Bin centres (T, D) of bin indices (T, D)."""
        b = np.asarray(tokens)
        if b.ndim != 2 or b.shape[1] != len(self.low):
            raise ValueError(f"tokens must have shape (T, {len(self.low)}), got {b.shape}")
        if not np.issubdtype(b.dtype, np.integer) or b.min() < 0 or b.max() >= self.n_bins:
            raise ValueError(f"tokens must be integers in [0, {self.n_bins})")
        return self.low + (b + 0.5) * (self.high - self.low) / self.n_bins
