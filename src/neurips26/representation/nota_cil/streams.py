"""Class-incremental streams: sklearn digits split into 2-class tasks, and a long synthetic Gaussian stream."""

from __future__ import annotations

import numpy as np


def split_tasks(
    X: np.ndarray,
    y: np.ndarray,
    class_order: np.ndarray,
    classes_per_task: int,
    test_fraction: float,
    seed: int,
) -> tuple[list[tuple[np.ndarray, np.ndarray]], list[tuple[np.ndarray, np.ndarray]]]:
    """Stratified train/test split, then tasks of ``classes_per_task`` classes in ``class_order``."""
    if isinstance(classes_per_task, bool) or not isinstance(classes_per_task, int) or classes_per_task < 1:
        raise ValueError(f"classes_per_task must be a positive integer, got {classes_per_task!r}")
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction!r}")
    order = list(class_order)
    if len(order) % classes_per_task:
        raise ValueError(f"{len(order)} classes do not split into tasks of {classes_per_task}")
    rng = np.random.default_rng(seed)
    train_idx, test_idx = {}, {}
    for c in order:
        idx = rng.permutation(np.flatnonzero(y == c))
        k = max(1, int(round(test_fraction * len(idx))))
        test_idx[c], train_idx[c] = idx[:k], idx[k:]
    tasks, tests = [], []
    for t in range(0, len(order), classes_per_task):
        cls = order[t : t + classes_per_task]
        tr = np.concatenate([train_idx[c] for c in cls])
        te = np.concatenate([test_idx[c] for c in cls])
        tasks.append((X[tr], y[tr]))
        tests.append((X[te], y[te]))
    return tasks, tests


def digits_stream(
    order_seed: int = 0, classes_per_task: int = 2, test_fraction: float = 0.3, split_seed: int = 0
):
    """sklearn digits (pixels / 16), classes in a random order drawn from ``order_seed``: 5 tasks of 2 classes."""
    from sklearn.datasets import load_digits

    d = load_digits()
    X = (d.data / 16.0).astype(np.float32)
    order = np.random.default_rng(order_seed).permutation(10)
    return split_tasks(X, d.target, order, classes_per_task, test_fraction, split_seed)


def gaussian_class_data(
    n_classes: int = 40,
    n_per_class: int = 150,
    latent_dim: int = 32,
    out_dim: int = 64,
    separation: float = 1.2,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian classes in ``latent_dim`` dimensions (unit covariance, means ~ N(0, separation^2 I)) pushed
    through a fixed random 2-layer tanh network into ``out_dim`` dimensions."""
    for name, v in (
        ("n_classes", n_classes),
        ("n_per_class", n_per_class),
        ("latent_dim", latent_dim),
        ("out_dim", out_dim),
    ):
        if isinstance(v, bool) or not isinstance(v, int) or v < 2:
            raise ValueError(f"{name} must be an integer >= 2, got {v!r}")
    rng = np.random.default_rng(seed)
    means = rng.normal(0, separation, (n_classes, latent_dim))
    y = np.repeat(np.arange(n_classes), n_per_class)
    z = means[y] + rng.normal(size=(len(y), latent_dim))
    W1 = rng.normal(0, 1 / np.sqrt(latent_dim), (latent_dim, 96))
    W2 = rng.normal(0, 1 / np.sqrt(96), (96, out_dim))
    X = np.tanh(np.tanh(z @ W1) @ W2 * 2.0)
    return X.astype(np.float32), y


def gaussian_stream(
    n_tasks: int,
    X: np.ndarray,
    y: np.ndarray,
    order_seed: int = 0,
    classes_per_task: int = 2,
    split_seed: int = 0,
):
    """The first ``n_tasks * classes_per_task`` classes of a random class order as a stream of tasks."""
    n_cls = len(np.unique(y))
    if (
        isinstance(n_tasks, bool)
        or not isinstance(n_tasks, int)
        or not 1 <= n_tasks * classes_per_task <= n_cls
    ):
        raise ValueError(f"n_tasks must be an integer in [1, {n_cls // classes_per_task}], got {n_tasks!r}")
    order = np.random.default_rng(order_seed).permutation(n_cls)[: n_tasks * classes_per_task]
    return split_tasks(X, y, order, classes_per_task, 0.3, split_seed)
