"""MaxSketch: Robust Distinct Counting in Streams via Random Projections (arXiv 2605.15571).

Counts distinct latent objects (not distinct observations) in a stream of noisy embeddings by keeping the
maximum of ``m`` random projections; see :mod:`neurips26.streams.maxsketch.maxsketch`.
"""

from .dask_sketch import sketch_dask
from .maxsketch import (
    LogLinearCalibration,
    MaxSketch,
    estimate_from_maxima,
    estimate_noise_scale,
    sphere_coordinate_logsf,
)

__all__ = [
    "MaxSketch",
    "sketch_dask",
    "LogLinearCalibration",
    "estimate_noise_scale",
    "estimate_from_maxima",
    "sphere_coordinate_logsf",
]
