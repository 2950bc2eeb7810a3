"""Run many (paper, seed) experiments through one interface: in-process, local processes, or Dask.

- ``"local"``: the default. With ``jobs=1`` every experiment runs in this process (live progress bars); with
  ``jobs > 1`` each task runs in a fresh worker process (``spawn``), at most ``jobs`` at a time, so one
  experiment's imports, caches and global state never leak into another's, and a worker killed by the OS (out of
  memory, a segfault) becomes an error result for its own task while the others go on.
- ``"dask"``: an existing ``dask.distributed`` cluster named by ``scheduler="tcp://HOST:PORT"``.
- ``"dask-local"``: a ``dask.distributed.LocalCluster`` started for the call (``jobs`` workers, 1 thread each).

Every task is :func:`neurips26.harness.runner.run_experiment` for one (slug, seed). Results are returned and
written under the caller's results folder (the figures travel back with a remote result). Ctrl-C cancels the
queued tasks and stops the running ones. A seed sweep (more than one seed) writes each seed's record under
``<out>/<slug>/<mode>/sweeps/<sweep-id>/seed-<s>/`` and a ``summary.json`` with, per declared check, every
seed's outcome, the median and the min-max spread, and whether each outcome matches the declaration.
"""

from __future__ import annotations

import base64
import multiprocessing as mp
import os
import signal
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

import numpy as np

from .records import (
    SCHEMA_VERSION,
    commit_run,
    mode_dir,
    new_run_id,
    sweep_dir,
    write_json_atomic,
    write_text_atomic,
)
from .runner import run_experiment

EXECUTORS = ("local", "dask", "dask-local")


class SchedulerUnreachable(ConnectionError):
    """The Dask scheduler named by the user could not be reached."""


def check_options(
    executor: str = "local",
    jobs: int = 1,
    scheduler: str | None = None,
    seeds: Sequence[int] = (0,),
    task_timeout: float | None = None,
) -> None:
    """Raise ``ValueError`` for options :func:`run_many` cannot honour (the CLI asks before its pre-flight)."""
    if executor not in EXECUTORS:
        raise ValueError(f"executor must be one of {EXECUTORS}, got {executor!r}")
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be a positive integer, got {jobs!r}")
    if executor == "dask" and not scheduler:
        raise ValueError("executor 'dask' needs scheduler='tcp://HOST:PORT' (or use executor 'dask-local')")
    if not seeds:
        raise ValueError("seeds must name at least one seed")
    if any(isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 0 for s in seeds):
        raise ValueError(f"seeds must be non-negative integers, got {list(seeds)!r}")
    if task_timeout is not None:
        if (
            isinstance(task_timeout, bool)
            or not isinstance(task_timeout, (int, float))
            or not task_timeout > 0
        ):
            raise ValueError(f"the task timeout must be a positive number of seconds, got {task_timeout!r}")
        if executor != "local" or jobs < 2:
            raise ValueError(
                "a task timeout needs local worker processes (executor 'local', jobs > 1): "
                "a task that runs in this process cannot be stopped"
            )


def parse_seeds(text: str) -> list[int]:
    """``"0-9"`` -> 0..9, ``"0,3,7"`` -> [0, 3, 7], ``"5"`` -> [5]; raises ``ValueError`` otherwise."""
    seeds: list[int] = []
    message = f"seeds must look like '0-9' or '0,3,7' (non-negative integers), got {text!r}"
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
        raise ValueError(message) from None
    if not seeds or min(seeds) < 0:
        raise ValueError(message)
    return sorted(set(seeds))


def error_result(slug: str, mode: str, seed: int, message: str) -> dict[str, Any]:
    """The record of a task that died outside the experiment (a killed worker, a lost Dask task)."""
    now = datetime.now(UTC).isoformat(timespec="seconds")
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": new_run_id(seed),
        "slug": slug,
        "title": slug,
        "tier": "-",
        "mode": mode,
        "seed": seed,
        "status": "error",
        "verdict": None,
        "checks": [],
        "tables": [],
        "figures": [],
        "timings": {},
        "metrics": {},
        "params": {},
        "notes": [],
        "total_seconds": 0.0,
        "started_at": now,
        "finished_at": now,
        "error": message,
    }


def _task(
    slug: str,
    mode: str,
    seed: int,
    out_dir: str,
    experiment: str | None,
    threads: int | None,
    record_dir: str | None,
    embed: bool,
) -> dict[str, Any]:
    # top-level so that worker processes and Dask can pickle it
    return run_experiment(
        slug,
        mode=mode,
        seed=seed,
        out_dir=out_dir,
        experiment=experiment,
        threads=threads,
        record_dir=record_dir,
        embed_files=embed,
    )


def _child(conn: Any, args: tuple[Any, ...]) -> None:
    # its own process group: a timeout or Ctrl-C stops the experiment together with anything it started
    os.setpgrp()
    try:
        conn.send(_task(*args))
    except BaseException:  # noqa: BLE001 - report anything, KeyboardInterrupt included, to the parent
        try:
            conn.send({"_child_error": traceback.format_exc()})
        except (OSError, ValueError):
            pass
    finally:
        conn.close()


def _kill_group(proc: Any, sig: int = signal.SIGKILL) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def _run_processes(
    tasks: list[tuple[Any, ...]], jobs: int, collect: Callable[[dict[str, Any]], None], timeout: float | None
) -> None:
    """Each task in its own spawned process, at most ``jobs`` at once; a dead worker gives an error result."""
    ctx = mp.get_context("spawn")
    queue = list(tasks)
    running: dict[Any, tuple[Any, tuple[Any, ...], float]] = {}  # conn -> (process, args, start)
    try:
        while queue or running:
            while queue and len(running) < jobs:
                args = queue.pop(0)
                parent, child = ctx.Pipe(duplex=False)
                proc = ctx.Process(target=_child, args=(child, args), daemon=True)
                proc.start()
                child.close()
                running[parent] = (proc, args, time.monotonic())
            ready = wait(list(running), timeout=1.0)
            for conn in ready:
                proc, args, _ = running.pop(conn)
                slug, mode, seed = args[0], args[1], args[2]
                try:
                    result = conn.recv()
                except (EOFError, OSError):
                    proc.join(5)
                    code = proc.exitcode
                    how = (
                        f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
                    )
                    result = error_result(
                        slug, mode, seed, f"the worker process died ({how}) before reporting"
                    )
                else:
                    proc.join(5)
                if "_child_error" in result:
                    result = error_result(slug, mode, seed, result["_child_error"])
                conn.close()
                collect(result)
            if timeout is not None:
                now = time.monotonic()
                for conn, (proc, args, start) in list(running.items()):
                    if now - start > timeout:
                        _kill_group(proc)
                        proc.join(5)
                        running.pop(conn)
                        conn.close()
                        collect(error_result(args[0], args[1], args[2], f"timed out after {timeout:g} s"))
    except KeyboardInterrupt:
        queue.clear()
        for proc, _, _ in running.values():
            _kill_group(proc, signal.SIGTERM)
        for conn, (proc, _, _) in running.items():
            proc.join(5)
            conn.close()
        raise


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
    task_timeout: float | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Run every (slug, seed) pair; return (results in (slug, seed) order, sweep summaries).

    ``on_result`` is called with each result as it completes. A crashed experiment, a killed worker or a lost
    Dask task gives a result with ``status == "error"``; it never stops the others. ``experiment`` overrides
    the registry's experiment (``"module:function"``, for the harness self-test). ``threads`` caps BLAS/torch
    threads inside each experiment (see ``run_experiment``); ``task_timeout`` (seconds; local processes only,
    a ``ValueError`` otherwise) stops a task that runs longer. Options are checked by :func:`check_options`.
    """
    check_options(executor, jobs, scheduler, seeds, task_timeout)
    out_dir = Path(out_dir)
    sweep = len(seeds) > 1
    stamp = new_run_id(seeds[0]) if sweep else ""
    sweep_ids = {slug: stamp for slug in slugs}
    remote = executor == "dask"

    def record_dir(slug: str, seed: int) -> str | None:
        return str(sweep_dir(out_dir, slug, mode, sweep_ids[slug]) / f"seed-{seed}") if sweep else None

    tasks = [
        (slug, mode, seed, str(out_dir), experiment, threads, record_dir(slug, seed), remote)
        for slug in slugs
        for seed in seeds
    ]
    results: dict[tuple[str, int], dict[str, Any]] = {}

    def collect(result: dict[str, Any]) -> None:
        key = (result["slug"], result["seed"])
        files = result.pop("_files", None)
        target = (
            Path(record_dir(*key))  # type: ignore[arg-type]
            if sweep
            else mode_dir(out_dir, key[0], mode) / result.get("run_id", new_run_id(key[1]))
        )
        if not (target / "result.json").exists():  # a remote worker, or a worker that died before writing
            for name, data in (files or {}).items():
                target.mkdir(parents=True, exist_ok=True)
                (target / name).write_bytes(base64.b64decode(data))
            write_json_atomic(target / "result.json", result)
            if not sweep:
                commit_run(out_dir, key[0], mode, target)
        results[key] = result
        if on_result is not None:
            on_result(result)

    if executor == "local" and jobs == 1:
        for slug, seed in [(t[0], t[2]) for t in tasks]:
            collect(
                run_experiment(
                    slug,
                    mode=mode,
                    seed=seed,
                    out_dir=out_dir,
                    progress_sink=progress_sink,
                    experiment=experiment,
                    threads=threads,
                    record_dir=record_dir(slug, seed),
                )
            )
    elif executor == "local":
        _run_processes(tasks, jobs, collect, task_timeout)
    else:
        _run_on_dask(tasks, executor, jobs, scheduler, collect, connect_timeout)

    ordered = [results[(t[0], t[2])] for t in tasks]
    summaries = []
    if sweep:
        for slug in slugs:
            summaries.append(
                write_sweep_summary(
                    [r for r in ordered if r["slug"] == slug], out_dir, slug, mode, sweep_ids[slug]
                )
            )
    return ordered, summaries


def _run_on_dask(tasks, executor, jobs, scheduler, collect, timeout) -> None:
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
            futures = {client.submit(_task, *t, pure=False, retries=0): t for t in tasks}
            try:
                for future in dask_as_completed(list(futures)):
                    slug, mode, seed = futures[future][:3]
                    try:
                        result = future.result()
                    except Exception as err:  # a killed worker, a lost task, an unpicklable result
                        result = error_result(
                            slug, mode, seed, f"the Dask task failed outside the experiment: {err!r}"
                        )
                    collect(result)
            except KeyboardInterrupt:
                client.cancel(list(futures))
                raise
    finally:
        if cluster is not None:
            cluster.close()


def write_sweep_summary(
    results: Iterable[dict[str, Any]], out_dir: Path, slug: str, mode: str, sweep_id: str
) -> dict[str, Any]:
    """Write ``summary.json`` of one sweep and point ``latest-sweep`` at it; return the summary.

    Per declared check: each seed's outcome and measured value, the median and min-max over seeds, the pass
    rate, and whether every seed's outcome equals the declared expectation. Crashed seeds are counted.
    """
    results = list(results)
    ok = [r for r in results if r.get("status") == "ok"]
    crashed = [r["seed"] for r in results if r.get("status") != "ok"]
    checks = []
    ids = list(dict.fromkeys(c["id"] for r in ok for c in r["checks"]))
    for cid in ids:
        rows = [(r["seed"], c) for r in ok for c in r["checks"] if c["id"] == cid]
        first = rows[0][1]
        values = np.array(
            [c["measured"] if isinstance(c["measured"], (int, float)) else np.nan for _, c in rows],
            dtype=float,
        )
        finite = values[np.isfinite(values)]
        outcomes = {str(seed): c["outcome"] for seed, c in rows}
        checks.append(
            {
                "id": cid,
                "kind": first["kind"],
                "op": first["op"],
                "threshold": first["threshold"],
                "expected": first["expected"],
                "outcomes": outcomes,
                "values": {str(seed): c["measured"] for seed, c in rows},
                "median": float(np.median(finite)) if finite.size else None,
                "min": float(finite.min()) if finite.size else None,
                "max": float(finite.max()) if finite.size else None,
                "pass_rate": float(np.mean([c["outcome"] == "pass" for _, c in rows])),
                "consistent": all(o == first["expected"] for o in outcomes.values()),
            }
        )
    verdicts = [r["verdict"] for r in ok]
    summary = {
        "schema_version": SCHEMA_VERSION,
        "sweep_id": sweep_id,
        "slug": slug,
        "mode": mode,
        "seeds": [r["seed"] for r in results],
        "crashed": crashed,
        "n_crashed": len(crashed),
        "verdicts": {v: verdicts.count(v) for v in sorted(set(verdicts), key=str)},
        "checks": checks,
        "consistent": not crashed and all(c["consistent"] for c in checks),
    }
    base = sweep_dir(out_dir, slug, mode, sweep_id)
    write_json_atomic(base / "summary.json", summary)
    write_text_atomic(mode_dir(out_dir, slug, mode) / "latest-sweep", sweep_id + "\n")
    return summary
