"""MaxSketch across Dask partitions equals, exactly, the single-process sketch of the same stream."""

import numpy as np
import pytest

from neurips26.streams import MaxSketch, sketch_dask

da = pytest.importorskip("dask.array")
db = pytest.importorskip("dask.bag")
pytest.importorskip("dask.distributed")


@pytest.fixture(scope="module")
def stream():
    rng = np.random.default_rng(0)
    objects = rng.standard_normal((300, 32))
    views = objects[rng.integers(0, 300, 3000)] + 0.05 * rng.standard_normal((3000, 32))
    return views


def test_array_partitions_merge_to_the_single_process_sketch(dask_client, stream):
    whole = MaxSketch(32, 256, seed=7).update(stream)
    for chunks in (250, 1000, 2999):
        merged = sketch_dask(da.from_array(stream, chunks=(chunks, 32)), dim=32, n_projections=256, seed=7)
        assert merged == whole
        np.testing.assert_array_equal(merged.maxima_, whole.maxima_)
        assert merged.estimate() == whole.estimate()


def test_centred_partitions_merge_to_the_centred_single_process_sketch(dask_client, stream):
    mu = np.linspace(-0.5, 0.5, 32)
    whole = MaxSketch(32, 256, seed=7, center=mu).update(stream)
    merged = sketch_dask(
        da.from_array(stream, chunks=(700, 32)), dim=32, n_projections=256, seed=7, center=mu
    )
    assert merged == whole and np.array_equal(merged.center, mu)
    with pytest.raises(ValueError, match="center"):
        sketch_dask(da.from_array(stream, chunks=(700, 32)), dim=32, center=np.ones(3))


def test_bag_partitions_merge_to_the_single_process_sketch(dask_client, stream):
    whole = MaxSketch(32, 256, seed=7).update(stream)
    bag = db.from_sequence(list(stream), npartitions=7)
    merged = sketch_dask(bag, dim=32, n_projections=256, seed=7)
    np.testing.assert_array_equal(merged.maxima_, whole.maxima_)
    assert merged.estimate() == whole.estimate()


def test_sketch_dask_bad_input(stream):
    with pytest.raises(TypeError, match="dask"):
        sketch_dask(stream, dim=32)
    with pytest.raises(ValueError, match="dim"):
        sketch_dask(da.from_array(stream, chunks=(500, 32)), dim=16)
    with pytest.raises(ValueError, match="n_projections"):
        sketch_dask(da.from_array(stream, chunks=(500, 32)), dim=32, n_projections=1)
