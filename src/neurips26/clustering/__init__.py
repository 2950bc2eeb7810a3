"""Clustering: mini-batch kernel k-means."""

from .._lazy import attach

_EXPORTS = {
    "MiniBatchKernelKMeans": ".minibatch_kernel_kmeans",
    "KernelKMeans": ".minibatch_kernel_kmeans",
    "HeatKernel": ".minibatch_kernel_kmeans",
    "kernel_kmeans_plusplus": ".minibatch_kernel_kmeans",
    "median_heuristic_gamma": ".minibatch_kernel_kmeans",
    "fit_dask_array": ".minibatch_kernel_kmeans",
    "predict_dask_array": ".minibatch_kernel_kmeans",
}
__getattr__, __dir__, __all__ = attach(__name__, _EXPORTS)
