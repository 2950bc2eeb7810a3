"""Label corruption at a known rate (digest, method step 1).

``symmetric``: a uniformly chosen fraction ``noise_rate`` of the labels is replaced by a uniformly chosen
*different* class (irreducible contradictions). ``asymmetric``: the same fraction is flipped along a fixed
class-pair map ``c -> (c + 1) mod K`` (learnable confusions). Exactly ``round(noise_rate * n)`` labels change.
"""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.utils import check_random_state

NOISE_KINDS = ("symmetric", "asymmetric")


def corrupt_labels(
    y,
    noise_rate: float,
    kind: str = "symmetric",
    n_classes: int | None = None,
    random_state=None,
) -> tuple[np.ndarray, np.ndarray]:
    """Corrupt integer labels ``y`` in ``{0, ..., K-1}``.

    Returns ``(y_noisy, flipped)`` where ``flipped`` is the boolean mask of the changed labels.
    """
    y = np.asarray(y)
    if y.ndim != 1 or y.size == 0:
        raise ValueError(f"y must be a non-empty 1-D array of class labels, got shape {y.shape}")
    if not np.issubdtype(y.dtype, np.integer):
        if not (np.issubdtype(y.dtype, np.floating) and np.all(np.isfinite(y)) and np.all(y == np.round(y))):
            raise ValueError("y must hold integer class labels")
        y = y.astype(np.int64)
    if y.min() < 0:
        raise ValueError("y must hold labels in {0, ..., n_classes - 1}")
    if not isinstance(noise_rate, numbers.Real) or not 0.0 <= noise_rate <= 1.0:
        raise ValueError(f"noise_rate must be a float in [0, 1], got {noise_rate!r}")
    if kind not in NOISE_KINDS:
        raise ValueError(f"kind must be one of {NOISE_KINDS}, got {kind!r}")
    K = int(y.max()) + 1 if n_classes is None else n_classes
    if not isinstance(K, numbers.Integral) or K < 2 or K <= y.max():
        raise ValueError(
            f"n_classes must be an integer >= 2 and > max(y) = {int(y.max())}, got {n_classes!r}"
        )
    rng = check_random_state(random_state)
    n = y.size
    idx = rng.choice(n, size=int(round(noise_rate * n)), replace=False)
    y_noisy = y.astype(np.int64).copy()
    if kind == "symmetric":
        shift = rng.randint(1, K, size=idx.size)  # a different class, uniformly
    else:
        shift = np.ones(idx.size, dtype=np.int64)
    y_noisy[idx] = (y_noisy[idx] + shift) % K
    flipped = np.zeros(n, dtype=bool)
    flipped[idx] = True
    return y_noisy, flipped
