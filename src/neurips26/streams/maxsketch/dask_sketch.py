"""MaxSketch over a Dask collection: one sketch per partition, where the partition lives, then merged.

Only ``m`` floats per partition travel to this process. Because merging is an elementwise maximum and
:class:`MaxSketch` makes each maximum independent of how the stream was batched, the result equals, exactly,
the single-process sketch of the same vectors.

Pattern::

    import dask.bag as db
    sketch = sketch_dask(db.from_sequence(vectors, npartitions=64), dim=384, n_projections=1024)
    sketch.estimate()
"""

from __future__ import annotations

from functools import partial

import numpy as np

from .maxsketch import MaxSketch


def _sketch_bytes(
    block, dim: int, n_projections: int, seed: int, noise_scale: float | str, center: np.ndarray | None = None
) -> bytes:
    sketch = MaxSketch(dim, n_projections, seed, noise_scale=noise_scale, center=center)
    batch = np.asarray(list(block) if not isinstance(block, np.ndarray) else block)
    if batch.size:  # empty partitions contribute nothing
        sketch.update(batch.reshape(-1, dim) if batch.ndim == 1 and batch.size % dim == 0 else batch)
    return sketch.to_bytes()


def _merge_bytes(parts) -> bytes:
    parts = list(parts)
    merged = MaxSketch.from_bytes(parts[0])
    for data in parts[1:]:
        merged.merge(MaxSketch.from_bytes(data))
    return merged.to_bytes()


def sketch_dask(
    data,
    dim: int,
    n_projections: int = 1024,
    seed: int = 0,
    noise_scale: float | str = "auto",
    center: np.ndarray | None = None,
) -> MaxSketch:
    """Sketch a Dask array (n x dim, row blocks) or a Dask bag of dim-vectors, partition by partition.

    The result is the single-process sketch of the same vectors (maxima, view registers and near-duplicate
    reservoir all merge exactly), so its default estimate is the same too, however the data is partitioned.
    ``center`` is :class:`MaxSketch`'s (a held-out mean subtracted before normalising).

    Raises ``TypeError`` for anything else and ``ValueError`` (from the workers' ``update``) for vectors of the
    wrong dimension or with NaN/inf.
    """
    # validate the parameters here, not remotely
    center = MaxSketch(dim, n_projections, seed, noise_scale=noise_scale, center=center).center
    try:
        import dask
        import dask.array as da
        import dask.bag as db
    except ImportError:  # optional extra
        raise ImportError("sketch_dask needs dask: pip install 'neurips26[scale]'") from None
    params = dict(dim=dim, n_projections=n_projections, seed=seed, noise_scale=noise_scale, center=center)
    if isinstance(data, da.Array):
        if data.ndim != 2 or data.shape[1] != dim:
            raise ValueError(f"the Dask array must have shape (n, dim={dim}), got {data.shape}")
        blocks = data.rechunk({1: -1}).to_delayed().ravel()
        parts = [dask.delayed(_sketch_bytes)(b, **params) for b in blocks]
        merged = dask.delayed(_merge_bytes)(parts).compute()
    elif isinstance(data, db.Bag):
        merged = data.reduction(partial(_sketch_bytes, **params), _merge_bytes).compute()
    else:
        raise TypeError(f"data must be a dask.array.Array or dask.bag.Bag, got {type(data).__name__}")
    return MaxSketch.from_bytes(merged)
