"""Self-test experiment: estimate the mean of a standard normal sample and check it against the closed form.

Used by the harness's own tests (executors, seed sweeps, Dask, the CLI) where a paper's quick run would only
slow them down.
"""

from __future__ import annotations

import numpy as np

from neurips26.harness import Run


def run(run: Run) -> None:
    _estimate(run, run.param("n", quick=2_000, full=200_000))


def run_small_sample(run: Run) -> None:
    """The same experiment on 10 draws: its precondition fails, so its claim is inconclusive (harness tests)."""
    _estimate(run, run.param("n", quick=10))


def _estimate(run: Run, n: int) -> None:
    run.check("sample_large_enough", n)
    x = run.rng.normal(size=n)
    se = 1.0 / np.sqrt(n)
    run.table([{"n": n, "sample mean": float(x.mean()), "standard error": se}])
    run.metric("sample_mean", float(x.mean()))
    # |mean| <= 5 standard errors fails with probability ~6e-7 per seed: a real check that can fail
    run.check("mean_within_5_se", abs(float(x.mean())) / se)
    run.check("variance_positive", float(x.var()))
