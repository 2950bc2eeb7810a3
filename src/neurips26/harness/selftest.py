"""A tiny, real experiment that exercises the whole protocol in well under a second.

Used by the harness's own tests (executors, seed sweeps, Dask) where a paper's minute-long quick run would only
slow them down: it estimates the mean of a standard normal sample and checks it against the closed form.
"""

from __future__ import annotations

import numpy as np

from .run import Run


def run(run: Run) -> None:
    n = run.pick(quick=2_000, full=200_000)
    x = run.rng.normal(size=n)
    se = 1.0 / np.sqrt(n)
    run.table([{"n": n, "sample mean": float(x.mean()), "standard error": se}])
    run.metric("sample mean", float(x.mean()))
    # |mean| <= 5 standard errors fails with probability ~6e-7 per seed: a real check that can fail
    run.check("|sample mean| in standard errors", abs(float(x.mean())) / se, "<=", 5.0)
