"""Source-partitioned multimodal data for ObsAlign: the digest's planted-mismatch generator and its clean twin,
and sklearn's digits / breast_cancer split into three views."""

from __future__ import annotations

import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits

from .federation import Source

# (observed modalities, classes covered, rows per class) of the six sources; modalities are 0, 1, 2
PLANTED_CLASSES = (8, 9)
LAYOUT = [
    ((0, 1, 2), tuple(range(0, 8)), 1.0),
    ((0, 1, 2), tuple(range(0, 8)), 1.0),
    ((0, 1), (0, 1, 2, 3, 4, 5, 8, 9), 1.0),
    ((0, 1), tuple(range(2, 10)), 1.0),
    ((0,), tuple(range(4, 10)), 1.0),
    ((1, 2), (3, 4, 5, 6, 7, 8, 9), 0.4),  # the small bridge source: the only one pairing (1, 2) on 8 and 9
]


def _split(views, y, test_fraction, rng):
    n = len(y)
    perm = rng.permutation(n)
    n_te = int(round(test_fraction * n))
    te, tr = perm[:n_te], perm[n_te:]
    return ({k: v[tr] for k, v in views.items()}, y[tr]), ({k: v[te] for k, v in views.items()}, y[te])


def make_planted_sources(
    per_class: int = 40,
    *,
    planted: bool = True,
    n_classes: int = 10,
    latent_dim: int = 8,
    view_dim: int = 12,
    separation: float = 1.2,
    noise: float = 0.6,
    shift: float = 0.5,
    test_fraction: float = 0.4,
    seed: int = 0,
) -> tuple[list[Source], list[Source]]:
    """``(train_sources, test_sources)`` of the digest's data A.

    z ~ N(mu_c, I) in R^latent_dim; view m of source s is ``W_m z + shift_sm + noise``. With ``planted=True`` the
    small source 5, the only one that co-observes modalities (1, 2) on classes 8 and 9, draws its modality-2 view
    through a different mixing ``W_2'``; the clean twin (``planted=False``) uses ``W_2`` everywhere.
    """
    if per_class < 5:
        raise ValueError(f"per_class must be >= 5, got {per_class}")
    rng = np.random.default_rng(seed)
    mu = rng.normal(scale=separation, size=(n_classes, latent_dim))
    W = [rng.normal(size=(view_dim, latent_dim)) / np.sqrt(latent_dim) for _ in range(3)]
    W_bad = rng.normal(size=(view_dim, latent_dim)) / np.sqrt(latent_dim)
    train, test = [], []
    for s, (mods, classes, size) in enumerate(LAYOUT):
        m_per = max(4, int(round(size * per_class)))
        y = np.repeat(np.asarray(classes), m_per)
        z = mu[y] + rng.normal(size=(len(y), latent_dim))
        views = {}
        for m in range(3):
            if m not in mods:
                continue
            Wm = W_bad if (planted and s == 5 and m == 2) else W[m]
            offset = rng.normal(scale=shift, size=view_dim)
            views[f"m{m}"] = (z @ Wm.T + offset + rng.normal(scale=noise, size=(len(y), view_dim))).astype(
                np.float32
            )
        (vtr, ytr), (vte, yte) = _split(views, y, test_fraction, rng)
        train.append(Source(vtr, ytr, name=f"source{s}", meta={"modalities": mods}))
        test.append(Source(vte, yte, name=f"source{s}", meta={"modalities": mods}))
    return train, test


def _bundled_views(name: str) -> tuple[list[np.ndarray], np.ndarray]:
    if name == "digits":
        d = load_digits()
        img = d.images / 16.0
        top, bottom = img[:, :4].reshape(len(img), -1), img[:, 4:].reshape(len(img), -1)
        small = img.reshape(len(img), 4, 2, 4, 2).mean((2, 4)).reshape(len(img), -1)
        rng = np.random.default_rng(0)
        return [top, bottom, small + rng.normal(scale=0.1, size=small.shape)], d.target
    if name == "breast_cancer":
        b = load_breast_cancer()
        X = (b.data - b.data.mean(0)) / b.data.std(0)
        return [X[:, :10], X[:, 10:20], X[:, 20:]], b.target
    raise ValueError(f"name must be 'digits' or 'breast_cancer', got {name!r}")


def make_bundled_sources(name: str = "digits", *, test_fraction: float = 0.4, seed: int = 0):
    """sklearn ``digits`` (top half, bottom half, noisy 4x4 thumbnail) or ``breast_cancer`` (mean / se / worst)
    split over six sources with the data-A availability pattern and skewed class coverage."""
    views, y = _bundled_views(name)
    n_classes = int(y.max()) + 1
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(y))
    owner = np.arange(len(y)) % len(LAYOUT)
    train, test = [], []
    for s, (mods, classes, _) in enumerate(LAYOUT):
        rows = order[owner == s]
        if n_classes > 2:  # skewed coverage as in data A; binary data keep both classes everywhere
            rows = rows[np.isin(y[rows], classes)]
        v = {f"m{m}": views[m][rows].astype(np.float32) for m in mods}
        (vtr, ytr), (vte, yte) = _split(v, y[rows], test_fraction, rng)
        train.append(Source(vtr, ytr, name=f"source{s}", meta={"modalities": mods}))
        test.append(Source(vte, yte, name=f"source{s}", meta={"modalities": mods}))
    return train, test
