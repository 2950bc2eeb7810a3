"""Shared fixtures."""

import pytest


@pytest.fixture(scope="session")
def dask_client():
    """A 2-worker dask.distributed LocalCluster (one thread each), shared by the tests of one pytest worker."""
    distributed = pytest.importorskip("dask.distributed")
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    )
    with distributed.Client(cluster) as client:
        yield client
    cluster.close()
