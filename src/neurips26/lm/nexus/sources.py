"""Multi-source data with spurious per-source features (Nexus's synthetic check), and the per-source probes.

:func:`multi_source_classification`: ``n_sources`` sources share one core predictor; source s also carries a
spurious feature block that tracks the label only inside source s (noise elsewhere). The out-of-distribution
source has every spurious block independent of the label. A model that leans on the spurious blocks fits the
training mixture as well as one that uses the core, but transfers worse.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["MultiSource", "multi_source_classification"]


@dataclass
class MultiSource:
    """Sampler of the sources. ``sample(source, n, rng)`` -> (X, y) float tensors; ``source = -1`` is OOD."""

    w_core: np.ndarray
    directions: np.ndarray  # (n_sources, block) unit vector inside each spurious block
    n_sources: int
    core_dim: int
    block: int
    core_scale: float
    spurious_strength: float
    noise: float

    @property
    def dim(self) -> int:
        return self.core_dim + self.n_sources * self.block

    def sample(self, source: int, n: int, rng: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        if not -1 <= source < self.n_sources:
            raise ValueError(f"source must be in [-1, {self.n_sources}), got {source}")
        core = rng.standard_normal((n, self.core_dim))
        p = 1.0 / (1.0 + np.exp(-self.core_scale * core @ self.w_core))
        y = (rng.random(n) < p).astype(np.float64)
        spur = rng.standard_normal((n, self.n_sources, self.block)) * self.noise
        if source >= 0:  # the source's own block points along its direction with the label's sign
            spur[:, source, :] += (2 * y - 1)[:, None] * self.spurious_strength * self.directions[source]
        X = np.concatenate([core, spur.reshape(n, -1)], axis=1)
        return torch.as_tensor(X, dtype=torch.float32), torch.as_tensor(y, dtype=torch.float32)


def multi_source_classification(
    n_sources: int = 4,
    core_dim: int = 8,
    block: int = 4,
    core_scale: float = 2.0,
    spurious_strength: float = 2.0,
    noise: float = 1.0,
    rng: np.random.Generator | int | None = None,
) -> MultiSource:
    """The digest's multi-source data (binary labels from a logistic core; see the module docstring)."""
    for name, v in (("n_sources", n_sources), ("core_dim", core_dim), ("block", block)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    if n_sources < 2:
        raise ValueError(f"n_sources must be >= 2, got {n_sources}")
    for name, v in (("core_scale", core_scale), ("spurious_strength", spurious_strength), ("noise", noise)):
        if not (v > 0 and np.isfinite(v)):
            raise ValueError(f"{name} must be positive, got {v!r}")
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    w = rng.standard_normal(core_dim)
    d = rng.standard_normal((n_sources, block))
    return MultiSource(
        w / np.linalg.norm(w),
        d / np.linalg.norm(d, axis=1, keepdims=True),
        n_sources,
        core_dim,
        block,
        float(core_scale),
        float(spurious_strength),
        float(noise),
    )
