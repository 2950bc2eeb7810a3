"""Bag generators for the reproduction (digest ``ssg-mil``, data A and data B) and bag validation/padding.

A data set is ``(bags, y, witnesses)``: a list of ``(m_b, d)`` float arrays, bag labels in {0, 1} and, per bag, a
boolean array marking the instances that carry the label evidence (the "witnesses"), plus a boolean array marking
decoys (matchable in both classes, never evidence).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["MILData", "synthetic_bags", "digits_bags", "check_bags", "pad_bags"]


@dataclass
class MILData:
    """Bags with labels and ground truth for localisation (``witness``) and for the decoy analysis (``decoy``)."""

    bags: list[np.ndarray]
    y: np.ndarray
    witness: list[np.ndarray]
    decoy: list[np.ndarray]

    def __len__(self) -> int:
        return len(self.bags)

    def subset(self, idx) -> MILData:
        idx = np.asarray(idx)
        return MILData(
            [self.bags[i] for i in idx],
            self.y[idx],
            [self.witness[i] for i in idx],
            [self.decoy[i] for i in idx],
        )

    @property
    def witness_rate(self) -> float:
        pos = self.y == 1
        return float(np.mean([w.mean() for w, p in zip(self.witness, pos) if p])) if pos.any() else 0.0


def check_bags(bags, y=None, n_features: int | None = None) -> tuple[list[np.ndarray], np.ndarray | None]:
    """Validate a list of bags (and labels): non-empty bags of one feature size, finite values, labels in {0, 1}."""
    if isinstance(bags, np.ndarray) and bags.dtype != object and bags.ndim == 3:
        bags = list(bags)
    if not isinstance(bags, (list, tuple)) or len(bags) == 0:
        raise ValueError("bags must be a non-empty list of 2-D arrays (n_instances, n_features)")
    out = []
    for i, bag in enumerate(bags):
        arr = np.asarray(bag, dtype=np.float64)
        if arr.ndim != 2:
            raise ValueError(
                f"bags[{i}] must be a 2-D array (n_instances, n_features), got shape {arr.shape}"
            )
        if arr.shape[0] == 0:
            raise ValueError(f"bags[{i}] is empty; every bag needs at least one instance")
        if not np.isfinite(arr).all():
            raise ValueError(f"bags[{i}] contains NaN or inf")
        out.append(arr)
    d = out[0].shape[1] if n_features is None else n_features
    for i, arr in enumerate(out):
        if arr.shape[1] != d:
            raise ValueError(
                f"bags[{i}] has {arr.shape[1]} features, expected n_features = {d} for every bag"
            )
    if y is None:
        return out, None
    y_arr = np.asarray(y)
    if y_arr.ndim != 1 or len(y_arr) != len(out):
        raise ValueError(
            f"y must be a 1-D array with one label per bag ({len(out)}), got shape {y_arr.shape}"
        )
    if not np.isin(y_arr, (0, 1)).all():
        raise ValueError("y must contain bag labels in {0, 1}")
    return out, y_arr.astype(np.int64)


def pad_bags(bags: list[np.ndarray], dtype=torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack bags into a zero-padded ``(n_bags, m_max, d)`` tensor and a ``(n_bags, m_max)`` validity mask."""
    m = np.array([len(b) for b in bags])
    X = np.zeros((len(bags), int(m.max()), bags[0].shape[1]))
    mask = np.arange(m.max())[None, :] < m[:, None]
    X[mask] = np.concatenate(bags)
    return torch.as_tensor(X, dtype=dtype), torch.as_tensor(mask)


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def synthetic_bags(
    n_bags: int,
    regime: str = "sparse",
    n_features: int = 32,
    noise: float = 0.35,
    random_state: int | None = 0,
    centres_seed: int | None = None,
    decoy_cosine: float = 0.8,
) -> MILData:
    """Digest data A: 32-d feature bags with rare, diverse evidence, heterogeneous nuisance and matchable decoys.

    - bag size ``m ~ U{50..100}``; half of the bags are positive;
    - 4 evidence clusters; a positive bag draws 2 of them and 1-3 evidence instances (``sparse``, witness rate
      about 2-3%) or a quarter of its instances (``dense``, witness rate 25%);
    - 4 decoy clusters, decoy ``j`` at cosine ``decoy_cosine`` (the digest's 0.8) from evidence cluster ``j``;
      every bag (either class) holds 2-6 decoys, so decoys are matchable but carry no label evidence;
    - nuisance: 20 clusters, each bag draws 3-5 of them (``sparse``: heterogeneous bags) or all bags share the
      same 3 (``dense``: homogeneous bags).

    Instances are ``centre + noise * N(0, I_d / d)`` (so the noise norm is about ``noise``); cluster centres are
    unit vectors drawn from ``centres_seed`` (the same for train and test, default ``random_state``).
    """
    if regime not in ("sparse", "dense"):
        raise ValueError(f"regime must be 'sparse' or 'dense', got {regime!r}")
    if not (isinstance(n_bags, (int, np.integer)) and n_bags >= 2):
        raise ValueError(f"n_bags must be an integer >= 2, got {n_bags!r}")
    if not (isinstance(n_features, (int, np.integer)) and n_features >= 8):
        raise ValueError(f"n_features must be an integer >= 8, got {n_features!r}")
    if not (np.isfinite(noise) and noise >= 0):
        raise ValueError(f"noise must be a finite float >= 0, got {noise!r}")
    if isinstance(decoy_cosine, bool) or not (np.isfinite(decoy_cosine) and -1 < decoy_cosine < 1):
        raise ValueError(f"decoy_cosine must lie in the open interval (-1, 1), got {decoy_cosine!r}")
    crng = np.random.default_rng(random_state if centres_seed is None else centres_seed)
    rng = np.random.default_rng(None if random_state is None else [random_state, 1])
    d = n_features
    evidence = _unit(crng.normal(size=(4, d)))
    ortho = crng.normal(size=(4, d))
    ortho -= (ortho * evidence).sum(1, keepdims=True) * evidence
    # cos(decoy_j, evidence_j) = decoy_cosine; the same draws for every decoy_cosine, so only the decoys move
    decoys = decoy_cosine * evidence + np.sqrt((1.0 - decoy_cosine) * (1.0 + decoy_cosine)) * _unit(ortho)
    nuisance = _unit(crng.normal(size=(20, d)))
    shared = crng.choice(20, 3, replace=False)

    y = rng.permutation(np.arange(n_bags) % 2)
    bags, witness, decoy = [], [], []
    for label in y:
        m = int(rng.integers(50, 101))
        n_dec = int(rng.integers(2, 7))
        if label == 1:
            n_ev = int(rng.integers(1, 4)) if regime == "sparse" else m // 4
        else:
            n_ev = 0
        kinds = np.zeros(m, dtype=np.int64)  # 0 nuisance, 1 evidence, 2 decoy
        kinds[:n_ev] = 1
        kinds[n_ev : n_ev + n_dec] = 2
        centres = np.empty((m, d))
        ev_pair = rng.choice(4, 2, replace=False)
        centres[kinds == 1] = evidence[rng.choice(ev_pair, n_ev)]
        centres[kinds == 2] = decoys[rng.integers(0, 4, n_dec)]
        pool = shared if regime == "dense" else rng.choice(20, int(rng.integers(3, 6)), replace=False)
        n_nui = int((kinds == 0).sum())
        centres[kinds == 0] = nuisance[rng.choice(pool, n_nui)]
        X = centres + noise * rng.normal(size=(m, d)) / np.sqrt(d)
        perm = rng.permutation(m)
        bags.append(X[perm])
        witness.append(kinds[perm] == 1)
        decoy.append(kinds[perm] == 2)
    return MILData(bags, y.astype(np.int64), witness, decoy)


def digits_bags(
    n_bags: int,
    bag_size: int = 40,
    split: str = "train",
    random_state: int | None = 0,
) -> MILData:
    """Digest data B: bags of 40 sklearn 8x8 digit images; a bag is positive iff it holds a "7".

    Positive bags hold 1-2 sevens (the witnesses); every bag holds 1-4 "1"s (the decoy, similar strokes, both
    classes); the rest is a heterogeneous mixture of 3-5 of the other digits {0, 2, 3, 4, 5, 6, 8, 9}. The images
    are split 50/50 into a train pool and a test pool once (fixed seed), so test bags never reuse train images.
    Pixels are scaled to [0, 1].
    """
    from sklearn.datasets import load_digits

    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    if not (isinstance(bag_size, (int, np.integer)) and bag_size >= 8):
        raise ValueError(f"bag_size must be an integer >= 8, got {bag_size!r}")
    if not (isinstance(n_bags, (int, np.integer)) and n_bags >= 2):
        raise ValueError(f"n_bags must be an integer >= 2, got {n_bags!r}")
    X, t = load_digits(return_X_y=True)
    X = X / 16.0
    half = np.random.default_rng(12345).permutation(len(X)) < len(X) // 2
    pool = half if split == "train" else ~half
    X, t = X[pool], t[pool]
    by_digit = {k: np.flatnonzero(t == k) for k in range(10)}
    others = np.array([0, 2, 3, 4, 5, 6, 8, 9])
    rng = np.random.default_rng(None if random_state is None else [random_state, 2])
    y = rng.permutation(np.arange(n_bags) % 2)
    bags, witness, decoy = [], [], []
    for label in y:
        n_ev = int(rng.integers(1, 3)) if label == 1 else 0
        n_dec = int(rng.integers(1, 5))
        digits = np.concatenate(
            [
                np.full(n_ev, 7),
                np.full(n_dec, 1),
                rng.choice(
                    rng.choice(others, int(rng.integers(3, 6)), replace=False), bag_size - n_ev - n_dec
                ),
            ]
        )
        idx = np.array([rng.choice(by_digit[k]) for k in digits])
        perm = rng.permutation(bag_size)
        bags.append(X[idx[perm]])
        witness.append(digits[perm] == 7)
        decoy.append(digits[perm] == 1)
    return MILData(bags, y.astype(np.int64), witness, decoy)
