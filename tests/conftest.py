"""Shared fixtures and the Hypothesis profiles."""

import importlib
import os
import sys
import textwrap
import uuid

import pytest
from hypothesis import settings

# `make test` sets HYPOTHESIS_PROFILE=ci: the same examples on every run, no deadline on a loaded machine
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("dev", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


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


@pytest.fixture(autouse=True)
def _no_stray_results(tmp_path, monkeypatch, request):
    """CLI tests never read or write the developer's ./results: every test runs in its own folder."""
    if "no_chdir" not in request.keywords:
        monkeypatch.chdir(tmp_path)


CLAIMS = """
quick = "a probe"

[[checks]]
id = "score"
measures = "a probe score"
kind = "claim"
op = "<"
threshold = 100.0
expect = "pass"
"""


@pytest.fixture
def make_experiment(tmp_path):
    """``make_experiment(body, claims=CLAIMS) -> "module:run"``: ``body`` is the source of ``run(run)``."""
    root = tmp_path / "probe_pkgs"
    root.mkdir(exist_ok=True)
    sys.path.insert(0, str(root))
    made = []

    def make(body: str, claims: str = CLAIMS) -> str:
        name = f"probe_{uuid.uuid4().hex[:10]}"
        pkg = root / name
        pkg.mkdir()
        (pkg / "__init__.py").write_text("")
        (pkg / "experiment.py").write_text(textwrap.dedent(body))
        (pkg / "claims.toml").write_text(textwrap.dedent(claims))
        importlib.invalidate_caches()
        made.append(name)
        return f"{name}.experiment:run"

    yield make
    sys.path.remove(str(root))
    for name in made:
        for mod in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            del sys.modules[mod]
