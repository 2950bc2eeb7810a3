"""Run many (paper, seed) experiments through one interface: in-process, a local process pool, or Dask.

- ``"local"``: the default. With ``jobs=1`` every experiment runs in this process (live progress bars);
  with ``jobs > 1`` a ``concurrent.futures.ProcessPoolExecutor``.
- ``"dask"``: an existing ``dask.distributed`` cluster named by ``scheduler="tcp://HOST:PORT"``.
- ``"dask-local"``: a ``dask.distributed.LocalCluster`` started for the call (``jobs`` workers, 1 thread each).

Every task is :func:`neurips26.harness.runner.run_experiment` for one (slug, seed); results are written by the
worker that ran them (``<out>/<slug>/result.json``; in a seed sweep ``<out>/<slug>/seeds/seed-<s>/``) and also
returned, so the caller can write them where the workers' files are not visible (a remote cluster). A sweep
adds ``<out>/<slug>/sweep-<mode>.json``: the median and the spread of every check over the seeds.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import numpy as np

from .runner import run_experiment, write_result

EXECUTORS = ("local", "dask", "dask-local")


class SchedulerUnreachable(ConnectionError):
    """The Dask scheduler named by the user could not be reached."""


def parse_seeds(text: str) -> list[int]:
    """``"0-9"`` -> 0..9, ``"0,3,7"`` -> [0, 3, 7], ``"5"`` -> [5]; raises ``ValueError`` otherwise."""
    seeds: list[int] = []
    try:
        for part in text.split(","):
            part = part.strip()
            if "-" in part:
                lo, hi = (int(x) for x in part.split("-", 1))
                if hi < lo:
                    raise ValueError
                seeds.extend(range(lo, hi + 1))
            else:
                seeds.append(int(part))
    except ValueError:
        raise ValueError(
            f"seeds must look like '0-9' or '0,3,7' (non-negative integers), got {text!r}"
        ) from None
    if not seeds or min(seeds) < 0:
        raise ValueError(f"seeds must look like '0-9' or '0,3,7' (non-negative integers), got {text!r}")
    return sorted(set(seeds))


def _task_dir(out_dir: Path, slug: str, seed: int, sweep: bool) -> Path:
    """Where one task writes: ``<out>`` itself, or ``<out>/<slug>/seeds/seed-<s>`` in a sweep."""
    return out_dir / slug / "seeds" / f"seed-{seed}" if sweep else out_dir


def _run_task(
    slug: str, mode: str, seed: int, out_dir: str, experiment: str | None, threads: int | None
) -> dict[str, Any]:
    # top-level so that process pools and Dask can pickle it
    return run_experiment(slug, mode=mode, seed=seed, out_dir=out_dir, experiment=experiment, threads=threads)


def run_many(
    slugs: Sequence[str],
    mode: str = "quick",
    seeds: Sequence[int] = (0,),
    out_dir: str | Path = "results",
    executor: str = "local",
    jobs: int = 1,
    scheduler: str | None = None,
    on_result: Callable[[dict[str, Any]], None] | None = None,
    progress_sink: Any = None,
    experiment: str | None = None,
    connect_timeout: str = "10s",
    threads: int | None = 1,
) -> list[dict[str, Any]]:
    """Run every (slug, seed) pair and return the results in (slug, seed) order.

    ``on_result`` is called with each result as it completes. A crashed experiment gives a result with
    ``status == "error"``; it never stops the others. With more than one seed, per-seed results go to
    ``<out>/<slug>/seeds/seed-<s>/<slug>/`` and the sweep summary to ``<out>/<slug>/sweep-<mode>.json``.
    ``experiment`` overrides the registry's experiment (``"module:function"``, for the harness self-test).
    ``threads`` caps BLAS/torch threads inside each experiment (see ``run_experiment``).
    """
    if executor not in EXECUTORS:
        raise ValueError(f"executor must be one of {EXECUTORS}, got {executor!r}")
    if not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be a positive integer, got {jobs!r}")
    if executor == "dask" and not scheduler:
        raise ValueError("executor 'dask' needs scheduler='tcp://HOST:PORT' (or use executor 'dask-local')")
    out_dir = Path(out_dir)
    sweep = len(seeds) > 1
    tasks = [(slug, seed) for slug in slugs for seed in seeds]
    results: dict[tuple[str, int], dict[str, Any]] = {}

    def collect(result: dict[str, Any]) -> None:
        key = (result["slug"], result["seed"])
        results[key] = result
        # the worker wrote it already; write again here so a remote cluster's results land locally too
        write_result(result, _task_dir(out_dir, key[0], key[1], sweep) / key[0])
        if on_result is not None:
            on_result(result)

    if executor == "local" and jobs == 1:
        for slug, seed in tasks:
            target = _task_dir(out_dir, slug, seed, sweep)
            collect(
                run_experiment(
                    slug,
                    mode=mode,
                    seed=seed,
                    out_dir=target,
                    progress_sink=progress_sink,
                    experiment=experiment,
                )
            )
    elif executor == "local":
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futures = [
                pool.submit(
                    _run_task,
                    slug,
                    mode,
                    seed,
                    str(_task_dir(out_dir, slug, seed, sweep)),
                    experiment,
                    threads,
                )
                for slug, seed in tasks
            ]
            for future in as_completed(futures):
                collect(future.result())
    else:
        _run_on_dask(
            tasks,
            mode,
            out_dir,
            sweep,
            executor,
            jobs,
            scheduler,
            collect,
            experiment,
            connect_timeout,
            threads,
        )

    ordered = [results[t] for t in tasks]
    if sweep:
        for slug in slugs:
            write_sweep_summary([r for r in ordered if r["slug"] == slug], out_dir / slug)
    return ordered


def _run_on_dask(
    tasks, mode, out_dir, sweep, executor, jobs, scheduler, collect, experiment, timeout, threads
) -> None:
    try:
        from dask.distributed import Client, LocalCluster
        from dask.distributed import as_completed as dask_as_completed
    except ImportError:  # optional extra
        raise ImportError(
            "the Dask executors need dask[distributed]: pip install 'neurips26[scale]'"
        ) from None
    cluster = None
    if executor == "dask-local":
        cluster = LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True, dashboard_address=None)
        address = cluster.scheduler_address
    else:
        address = scheduler
    try:
        try:
            client = Client(address, timeout=timeout)
        except (OSError, TimeoutError) as err:
            raise SchedulerUnreachable(
                f"could not reach the Dask scheduler at {address!r} ({type(err).__name__}: {err}); "
                "nothing was run, results already in the output folder are untouched"
            ) from None
        with client:
            # one thread per experiment: BLAS inside each experiment is not oversubscribed
            futures = [
                client.submit(
                    _run_task,
                    slug,
                    mode,
                    seed,
                    str(_task_dir(out_dir, slug, seed, sweep)),
                    experiment,
                    threads,
                    pure=False,
                )
                for slug, seed in tasks
            ]
            for future in dask_as_completed(futures):
                collect(future.result())
    finally:
        if cluster is not None:
            cluster.close()


def write_sweep_summary(results: Iterable[dict[str, Any]], paper_dir: Path) -> Path:
    """``sweep-<mode>.json``: per check, the median and spread (min, max, IQR) over seeds and the pass rate."""
    results = [r for r in results if r.get("status") == "ok"]
    paper_dir.mkdir(parents=True, exist_ok=True)
    if not results:
        path = paper_dir / "sweep-error.json"
        path.write_text(json.dumps({"status": "error", "reason": "every seed crashed"}))
        return path
    mode = results[0]["mode"]
    names = [c["name"] for c in results[0]["checks"]]
    checks = []
    for name in names:
        rows = [c for r in results for c in r["checks"] if c["name"] == name]
        values = np.array([np.nan if c["measured"] is None else c["measured"] for c in rows], dtype=float)
        finite = values[np.isfinite(values)]
        q25, med, q75 = np.percentile(finite, [25, 50, 75]) if finite.size else (np.nan,) * 3
        checks.append(
            {
                "name": name,
                "op": rows[0]["op"],
                "threshold": rows[0]["threshold"],
                "median": None if not finite.size else float(med),
                "min": None if not finite.size else float(finite.min()),
                "max": None if not finite.size else float(finite.max()),
                "iqr": None if not finite.size else float(q75 - q25),
                "pass_rate": float(np.mean([c["passed"] for c in rows])),
            }
        )
    verdicts = [r["verdict"] for r in results]
    summary = {
        "slug": results[0]["slug"],
        "mode": mode,
        "seeds": [r["seed"] for r in results],
        "verdicts": {v: verdicts.count(v) for v in sorted(set(verdicts))},
        "checks": checks,
    }
    path = paper_dir / f"sweep-{mode}.json"
    path.write_text(json.dumps(summary, indent=2))
    return path


def default_jobs() -> int:
    """Worker count for ``--jobs 0``: the machine's cores."""
    return max(1, os.cpu_count() or 1)
