"""Mini-batch kernel k-means on data that never sits in one process: a Dask array, batch by batch.

Each iteration draws ``batch_size`` row indices uniformly over the whole array and asks Dask for just those rows
(only the blocks that hold them are touched, and only the sampled rows travel to this process), then takes one
``partial_fit`` step. Labelling maps ``predict`` over the blocks where they live. Memory in this process is
O(batch_size * d + tau * batch_size * d) however large X is.

Pattern::

    from dask.distributed import Client
    import dask.array as da
    client = Client("tcp://scheduler:8786")          # or LocalCluster()
    X = da.from_zarr("points.zarr")                   # n x d, chunked by rows
    est = fit_dask_array(MiniBatchKernelKMeans(8, gamma=0.5, tau=10), X, n_batches=50, batch_size=1024)
    labels = predict_dask_array(est, X)               # a lazy Dask array of cluster indices
"""

from __future__ import annotations

import numbers

import numpy as np

from .kernel_kmeans import MiniBatchKernelKMeans


def _check_dask_array(X):
    try:
        import dask.array as da
    except ImportError:  # optional extra
        raise ImportError("fit_dask_array needs dask: pip install 'neurips26[scale]'") from None
    if not isinstance(X, da.Array):
        raise TypeError(f"X must be a dask.array.Array, got {type(X).__name__}")
    if X.ndim != 2:
        raise ValueError(f"X must be a 2D Dask array (n_samples, n_features), got ndim={X.ndim}")
    if any(np.isnan(c) for c in X.chunks[0]):
        raise ValueError("X must have known chunk sizes along axis 0 (call X.compute_chunk_sizes())")
    return X


def fit_dask_array(
    estimator: MiniBatchKernelKMeans,
    X,
    n_batches: int = 50,
    batch_size: int | None = None,
    random_state=None,
) -> MiniBatchKernelKMeans:
    """Fit ``estimator`` with ``n_batches`` ``partial_fit`` steps on uniform row samples of the Dask array X."""
    if not isinstance(estimator, MiniBatchKernelKMeans):
        raise TypeError(f"estimator must be a MiniBatchKernelKMeans, got {type(estimator).__name__}")
    X = _check_dask_array(X)
    if not isinstance(n_batches, numbers.Integral) or n_batches < 1:
        raise ValueError(f"n_batches must be a positive integer, got {n_batches!r}")
    b = estimator.batch_size if batch_size is None else batch_size
    n = int(X.shape[0])
    if not isinstance(b, numbers.Integral) or b < estimator.n_clusters:
        raise ValueError(f"batch_size must be an integer >= n_clusters={estimator.n_clusters}, got {b!r}")
    rng = np.random.default_rng(random_state)
    for _ in range(n_batches):
        rows = np.sort(rng.integers(0, n, size=min(b, n)))
        estimator.partial_fit(X[rows].compute())  # only the sampled rows leave the workers
    return estimator


def predict_dask_array(estimator: MiniBatchKernelKMeans, X):
    """Labels of every row of X, computed block by block where the blocks live (a lazy Dask array)."""
    X = _check_dask_array(X)
    return X.map_blocks(estimator.predict, drop_axis=1, dtype=np.int64)
