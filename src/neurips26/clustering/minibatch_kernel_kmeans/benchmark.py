"""Peer benchmark: tslearn's KernelKMeans against our full-batch and mini-batch kernel k-means.

Same data (rings+blobs), same RBF kernel and gamma, one process. Reports wall time and ARI, and the ratios
to tslearn (time: tslearn / ours; ARI: ours - tslearn).
"""

from __future__ import annotations

import time

from sklearn.metrics import adjusted_rand_score

from neurips26.clustering import KernelKMeans, MiniBatchKernelKMeans
from neurips26.clustering.minibatch_kernel_kmeans import median_heuristic_gamma
from neurips26.clustering.minibatch_kernel_kmeans.experiment import rings_blobs


def main(quick: bool = True) -> list[dict]:
    try:
        from tslearn.clustering import KernelKMeans as TslearnKernelKMeans
    except ImportError:  # optional peer
        print("tslearn not installed: pip install 'neurips26[peers]'")
        return []
    rows = []
    for n in [2000, 4000] if quick else [2000, 5000, 10000]:
        X, y = rings_blobs(n, seed=0)
        gamma = median_heuristic_gamma(X, random_state=0)
        methods = {
            "tslearn KernelKMeans": TslearnKernelKMeans(
                8, kernel="rbf", kernel_params={"gamma": gamma}, max_iter=100, n_init=1, random_state=0
            ),
            "ours KernelKMeans": KernelKMeans(8, gamma=gamma, random_state=0),
            "ours MiniBatchKernelKMeans (defaults)": MiniBatchKernelKMeans(8, gamma=gamma, random_state=0),
        }
        measured = {}
        for name, est in methods.items():
            t0 = time.perf_counter()
            labels = est.fit(X).labels_
            measured[name] = (time.perf_counter() - t0, adjusted_rand_score(y, labels))
        ref_t, ref_ari = measured["tslearn KernelKMeans"]
        for name, (seconds, ari) in measured.items():
            rows.append(
                {
                    "n": n,
                    "method": name,
                    "seconds": seconds,
                    "ARI": ari,
                    "time ratio (tslearn / this)": ref_t / seconds,
                    "ARI - tslearn ARI": ari - ref_ari,
                }
            )
    return rows


if __name__ == "__main__":
    for row in main():
        print(row)
