"""Mini-batch kernel k-means fitted from a Dask array on a LocalCluster, batch by batch."""

import numpy as np
import pytest
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score

from neurips26.clustering import MiniBatchKernelKMeans, fit_dask_array, predict_dask_array

da = pytest.importorskip("dask.array")
pytest.importorskip("dask.distributed")


def test_fit_from_dask_array_on_local_cluster(dask_client):
    X, y = make_blobs(4000, centers=4, n_features=3, cluster_std=0.8, random_state=0)
    Xd = da.from_array(X, chunks=(500, 3)).persist()  # 8 blocks living on the workers
    est = fit_dask_array(
        MiniBatchKernelKMeans(4, tau=5, random_state=0), Xd, n_batches=12, batch_size=200, random_state=0
    )
    assert est.n_iter_ == 12
    labels = predict_dask_array(est, Xd)
    assert isinstance(labels, da.Array)
    labels = labels.compute()
    assert adjusted_rand_score(y, labels) > 0.9
    np.testing.assert_array_equal(labels, est.predict(X))


def test_dask_fit_bad_input():
    X = da.zeros((100, 2), chunks=50)
    with pytest.raises(TypeError, match="dask"):
        fit_dask_array(MiniBatchKernelKMeans(2), np.zeros((100, 2)))
    with pytest.raises(TypeError, match="estimator"):
        fit_dask_array(object(), X)
    with pytest.raises(ValueError, match="2D"):
        fit_dask_array(MiniBatchKernelKMeans(2), da.zeros(100, chunks=50))
    with pytest.raises(ValueError, match="n_batches"):
        fit_dask_array(MiniBatchKernelKMeans(2), X, n_batches=0)
    with pytest.raises(ValueError, match="batch_size"):
        fit_dask_array(MiniBatchKernelKMeans(4), X, batch_size=2)
