"""Reproduction: mini-batch kernel k-means is >= 10x faster than full-batch kernel k-means at n = 20000 with
ARI within 0.03, beats linear mini-batch k-means by >= 0.2 ARI on rings data, and its per-iteration time does
not grow with n (digest: ``minibatch-kernel-kmeans``).

Data: "rings+blobs" (k = 8): two concentric rings, two half-moons and four Gaussian blobs in 2-D, embedded in
d = 10 with Gaussian noise dimensions and a random rotation; sklearn's digits (k = 10) for quality only.
Every kernel method uses the same RBF kernel with the median-heuristic gamma (the digest's protocol) and the
same kernel k-means++ seed points.
"""

from __future__ import annotations

import time

import matplotlib.pyplot as plt
import numpy as np
from scipy.stats import special_ortho_group
from sklearn.cluster import MiniBatchKMeans
from sklearn.datasets import load_digits, make_circles, make_moons
from sklearn.kernel_approximation import Nystroem
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score
from sklearn.pipeline import make_pipeline

from neurips26.harness import Run

from .kernel_kmeans import KernelKMeans, MiniBatchKernelKMeans, kernel_kmeans_plusplus
from .kernels import make_kernel, median_heuristic_gamma

BATCH_SIZE = 512
TAU = 4  # tau * b = 2048 stays well below n = 5000 (the digest's pitfall: otherwise centres span all of X)


def rings_blobs(n: int, d: int = 10, noise: float = 0.06, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The digest's "rings+blobs" data: 8 clusters (2 rings, 2 moons, 4 blobs) in 2-D, embedded in d dims."""
    rng = np.random.default_rng(seed)
    per = n // 8
    Xc, yc = make_circles(2 * per, factor=0.45, noise=noise / 2, random_state=seed)
    Xm, ym = make_moons(2 * per, noise=noise, random_state=seed + 1)
    parts, labels = [Xc * 2.0, Xm * 1.2 + np.array([4.5, -0.5])], [yc, ym + 2]
    centres = np.array([[-4.0, 3.0], [-4.0, -3.0], [1.0, 4.2], [1.0, -4.2]])
    for i, c in enumerate(centres):
        m = per if i < 3 else n - 7 * per
        parts.append(c + rng.normal(scale=0.35, size=(m, 2)))
        labels.append(np.full(m, 4 + i))
    X2, y = np.vstack(parts), np.concatenate(labels)
    X = np.hstack([X2, rng.normal(scale=noise, size=(len(X2), d - 2))])
    Q = special_ortho_group.rvs(d, random_state=seed)
    perm = rng.permutation(len(X))
    return (X @ Q.T)[perm], y[perm]


def _seed_points(X: np.ndarray, k: int, gamma: float, seed: int) -> np.ndarray:
    """Shared kernel k-means++ seeds (on a 3b-point uniform sample) for every kernel method."""
    rng = np.random.RandomState(seed)
    sample = X[rng.choice(len(X), min(3 * BATCH_SIZE, len(X)), replace=False)]
    kfn, _ = make_kernel("rbf", gamma, sample)
    return sample[kernel_kmeans_plusplus(sample, k, kfn, np.ones(len(sample)), rng)]


def _timed_fit(est, X):
    t0 = time.perf_counter()
    est.fit(X)
    labels = est.labels_ if hasattr(est, "labels_") else est[-1].labels_
    return labels, time.perf_counter() - t0


def _compare(run: Run, X, y, k, seed, name):
    """Every method on one data set; returns rows (method, ARI, NMI, seconds)."""
    gamma = median_heuristic_gamma(X, "rbf", random_state=seed)
    C0 = _seed_points(X, k, gamma, seed)
    methods = {
        "mini-batch kernel k-means (ours, sqrt lr)": MiniBatchKernelKMeans(
            k, gamma=gamma, batch_size=BATCH_SIZE, tau=TAU, init=C0, random_state=seed
        ),
        "mini-batch kernel k-means (ours, sklearn lr)": MiniBatchKernelKMeans(
            k,
            gamma=gamma,
            batch_size=BATCH_SIZE,
            tau=TAU,
            learning_rate="sklearn",
            init=C0,
            random_state=seed,
        ),
        "full-batch kernel k-means": KernelKMeans(k, gamma=gamma, init=C0, random_state=seed),
        "linear MiniBatchKMeans": MiniBatchKMeans(k, batch_size=BATCH_SIZE, n_init=3, random_state=seed),
        "Nystroem(300) + MiniBatchKMeans": make_pipeline(
            Nystroem(gamma=gamma, n_components=300, random_state=seed),
            MiniBatchKMeans(k, batch_size=BATCH_SIZE, n_init=3, random_state=seed),
        ),
    }
    rows = []
    for method, est in run.progress(methods.items(), f"{name}: fitting", total=len(methods)):
        labels, seconds = _timed_fit(est, X)
        n_iter = getattr(est, "n_iter_", None)
        rows.append(
            {
                "data": name,
                "n": len(X),
                "method": method,
                "ARI": adjusted_rand_score(y, labels),
                "NMI": normalized_mutual_info_score(y, labels),
                "seconds": seconds,
                "iterations": n_iter,
            }
        )
    return rows


def _per_iteration_seconds(X, seed, n_iter=30) -> float:
    """Median wall time of one mini-batch iteration at fixed b, tau (no early stop)."""
    est = MiniBatchKernelKMeans(
        8, batch_size=BATCH_SIZE, tau=TAU, tol=0.0, max_iter=n_iter, random_state=seed
    )
    est.fit(X)
    return float(np.median(est.iteration_seconds_[TAU:]))  # after the support has reached its steady size


def run(run: Run) -> None:
    k = 8
    seeds = run.seeds(run.pick(quick=1, full=3))
    n_big = 20000
    run.note(
        f"b = {BATCH_SIZE}, tau = {TAU}; quick mode runs the n = 20000 comparison with 1 seed, full with 3 "
        "(medians reported); every kernel method uses the median-heuristic RBF gamma and the same seeds."
    )
    rows, speedups, ari_gaps, ari_lin = [], [], [], []
    for seed in seeds:
        X, y = rings_blobs(n_big, seed=seed)
        r = _compare(run, X, y, k, seed, "rings+blobs")
        rows += r
        by = {row["method"]: row for row in r}
        ours = by["mini-batch kernel k-means (ours, sqrt lr)"]
        full = by["full-batch kernel k-means"]
        speedups.append(full["seconds"] / ours["seconds"])
        ari_gaps.append(ours["ARI"] - full["ARI"])
        ari_lin.append(ours["ARI"] - by["linear MiniBatchKMeans"]["ARI"])
    digits = load_digits()
    rows += _compare(run, digits.data, digits.target, 10, seeds[0], "digits")
    run.table(
        rows,
        name="results",
        caption="fit + final labelling wall time; Gram construction counted for full batch",
    )

    # per-iteration time at fixed b, tau as n grows (n-independence)
    sizes = run.pick(quick=[5000, 20000], full=[5000, 10000, 20000])
    per_iter = {}
    for n in run.progress(sizes, "per-iteration time"):
        X, _ = rings_blobs(n, seed=seeds[0])
        per_iter[n] = float(np.median([_per_iteration_seconds(X, s) for s in seeds]))
    run.table([{"n": n, "seconds per iteration": s} for n, s in per_iter.items()], name="per_iteration")

    if (
        run.full
    ):  # the digest's tau sweep (reported, not gated): more batches kept = larger centres, slower steps
        X, y = rings_blobs(n_big, seed=seeds[0])
        gamma = median_heuristic_gamma(X, "rbf", random_state=seeds[0])
        sweep = []
        for tau in run.progress([TAU, 10, 30, 100], "tau sweep"):
            est = MiniBatchKernelKMeans(k, gamma=gamma, batch_size=BATCH_SIZE, tau=tau, random_state=seeds[0])
            labels, seconds = _timed_fit(est, X)
            sweep.append(
                {
                    "tau": tau,
                    "tau * b / n": tau * BATCH_SIZE / n_big,
                    "ARI": adjusted_rand_score(y, labels),
                    "seconds": seconds,
                    "iterations": est.n_iter_,
                    "seconds per iteration": float(np.median(est.iteration_seconds_)),
                }
            )
        run.table(sweep, name="tau_sweep", caption=f"n = {n_big}, b = {BATCH_SIZE}, median-heuristic gamma")

    rings = [r for r in rows if r["data"] == "rings+blobs"]
    for key, method in (("full_batch", "full-batch kernel k-means"), ("linear", "linear MiniBatchKMeans")):
        run.metric(f"ari_{key}_rings", float(np.median([r["ARI"] for r in rings if r["method"] == method])))
    run.check("speedup_vs_full_batch", float(np.median(speedups)))
    run.check("ari_gap_vs_full_batch", float(np.median(ari_gaps)))
    run.check("ari_gain_vs_linear_rings", float(np.median(ari_lin)))
    run.check("per_iteration_growth", per_iter[20000] / per_iter[5000])

    fig, ax = plt.subplots(figsize=(7, 4.5))
    methods = list(dict.fromkeys(row["method"] for row in rows))
    markers = "osD^v"
    for i, method in enumerate(methods):
        pts = [(r["seconds"], r["ARI"]) for r in rows if r["data"] == "rings+blobs" and r["method"] == method]
        ax.scatter(*zip(*pts), s=45, marker=markers[i % len(markers)], label=method)
    ax.legend(fontsize=7, loc="lower right")
    ax.set_xscale("log")
    ax.set_xlabel("wall time, fit + labelling (s, log)")
    ax.set_ylabel("ARI")
    ax.set_title(f"rings+blobs, n = {n_big} ({len(seeds)} seed(s), one point per seed)")
    run.figure(fig, "ari_vs_time", caption="ARI against wall time for every method (rings+blobs, n = 20000)")
