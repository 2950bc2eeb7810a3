"""Run many (paper, seed) experiments through one interface: in-process, local processes, or Dask.

- ``"local"``: the default. With ``jobs=1`` every experiment runs in this process (live progress bars); with
  ``jobs > 1`` each task runs in a fresh worker process (``spawn``), at most ``jobs`` at a time, so one
  experiment's imports, caches and global state never leak into another's, and a worker killed by the OS (out of
  memory, a segfault) becomes an error result for its own task while the others go on.
- ``"dask"``: an existing ``dask.distributed`` cluster named by ``scheduler="tcp://HOST:PORT"``.
- ``"dask-local"``: a ``dask.distributed.LocalCluster`` started for the call (``jobs`` workers, 1 thread each).

Every task is :func:`neurips26.harness.runner.run_experiment` for one (slug, seed). Results are returned and
written under the caller's results folder (the figures travel back with a remote result). A seed sweep (more
than one seed) writes each seed's record under ``<out>/<slug>/<mode>/sweeps/<sweep-id>/seed-<s>/`` and a
``summary.json`` with, per declared check, every seed's outcome, the median and the min-max spread, and whether
each outcome matches the declaration.

Ctrl-C, or SIGTERM (what ``timeout``, CI cancellation and systemd send), cancels the queued tasks and stops the
running ones. A worker's SIGTERM becomes an exception, so that its experiment's ``finally`` blocks run and its
unfinished run folder is removed; on Linux a worker also stops when its parent dies, even by SIGKILL.
"""

from __future__ import annotations

import base64
import ctypes
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

import numpy as np

from .records import (
    SCHEMA_VERSION,
    commit_run,
    discard_unfinished,
    mode_dir,
    new_run_id,
    sweep_dir,
    write_json_atomic,
    write_text_atomic,
)
from .runner import Terminated, _empty_body, note_stop, run_experiment

EXECUTORS = ("local", "dask", "dask-local")
# seconds a stopped worker has for its clean-up (the experiment's finally blocks) before SIGKILL
STOP_GRACE = 5.0
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


class SchedulerUnreachable(ConnectionError):
    """The Dask scheduler named by the user could not be reached."""


def _raise_terminated(signum: int, frame: Any) -> None:
    raise note_stop(Terminated(f"stopped by signal {signum}"))


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """In the block SIGTERM raises :class:`Terminated` instead of killing this process on the spot.

    Killed outright, the process would orphan its workers, which sit in process groups of their own. A handler
    installed by someone else is left alone, and so is a call from another thread (Python runs signal handlers
    in the main thread only).
    """
    if threading.current_thread() is not threading.main_thread() or (
        signal.getsignal(signal.SIGTERM) != signal.SIG_DFL
    ):
        yield
        return
    signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


@contextmanager
def _shielded() -> Iterator[None]:
    """A second Ctrl-C or SIGTERM while the workers are being stopped must not cut the stopping short."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in saved:
        signal.signal(sig, lambda *_: None)
    try:
        yield
    finally:
        for sig, handler in saved.items():
            if handler is not None:
                signal.signal(sig, handler)


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


def error_result(slug: str, mode: str, seed: int, message: str, run_id: str | None = None) -> dict[str, Any]:
    """The record of a task that died outside the experiment (a killed worker, a lost Dask task)."""
    now = datetime.now(UTC).isoformat(timespec="seconds")
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id or new_run_id(seed),
        **_empty_body(slug, mode, seed),
        "title": slug,
        "tier": "-",
        "status": "error",
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
    run_id: str | None = None,
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
        run_id=run_id,
    )


def _die_with_parent() -> None:
    """Have Linux send this worker SIGTERM when its parent dies, even by SIGKILL, so that none outlives it."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        except (OSError, AttributeError):  # no prctl in this libc: the parent's own stop still works
            pass
    parent = mp.parent_process()
    if parent is not None and os.getppid() != parent.pid:  # it died before prctl took effect
        raise Terminated("the parent process is gone")


def _child(conn: Any, args: tuple[Any, ...]) -> None:
    # SIGTERM (the parent stopping it, or the parent's death) raises, so that the runner removes the run folder
    # and the experiment's finally blocks run; a second SIGTERM does not interrupt that clean-up
    stopping: list[int] = []

    def terminated(signum: int, frame: Any) -> None:
        if not stopping:
            stopping.append(signum)
            raise note_stop(Terminated(f"stopped by signal {signum}"))

    signal.signal(signal.SIGTERM, terminated)
    # its own process group: a timeout or Ctrl-C stops the experiment together with anything it started
    os.setpgrp()
    try:
        _die_with_parent()
        conn.send(_task(*args))
    except BaseException:  # noqa: BLE001 - report anything, KeyboardInterrupt included, to the parent
        try:
            conn.send({"_child_error": traceback.format_exc()})
        except (OSError, ValueError):
            pass
    finally:
        conn.close()
        if stopping:  # pass the stop on to what the experiment started (the parent may be gone)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            try:
                os.killpg(0, signal.SIGTERM)
            except OSError:
                pass


def _signal_group(proc: Any, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:  # the group is gone, or the worker has not made it yet
        if proc.exitcode is None:
            try:
                os.kill(proc.pid, sig)
            except ProcessLookupError:
                pass
    except PermissionError:
        pass


def _stop(procs: Sequence[Any], grace: float = STOP_GRACE) -> None:
    """SIGTERM each worker's group (the worker cleans up, see ``_child``), then SIGKILL what is left."""
    for proc in procs:
        _signal_group(proc, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for proc in procs:
        proc.join(max(0.0, deadline - time.monotonic()))
    for proc in procs:
        _signal_group(proc, signal.SIGKILL)  # a worker stuck in C code, and anything it left running
        proc.join(5)


def _folder(args: tuple[Any, ...]) -> Path:
    """The run folder of a task: its sweep folder, or the run id the pool picked for it."""
    slug, mode, _, out_dir, _, _, record_dir, _, run_id = args
    return Path(record_dir) if record_dir else mode_dir(out_dir, slug, mode) / run_id


def _run_processes(
    tasks: list[tuple[Any, ...]], jobs: int, collect: Callable[[dict[str, Any]], None], timeout: float | None
) -> None:
    """Each task in its own spawned process, at most ``jobs`` at once; a dead worker gives an error result.

    The pool names each task's run folder, so that when a worker dies or is stopped before writing its record,
    no empty or partial folder stays behind.
    """
    ctx = mp.get_context("spawn")
    queue = list(tasks)
    running: dict[Any, tuple[Any, tuple[Any, ...], float]] = {}  # conn -> (process, args, start)

    def lost(args: tuple[Any, ...], message: str) -> dict[str, Any]:
        discard_unfinished(_folder(args))
        return error_result(args[0], args[1], args[2], message, run_id=None if args[6] else args[8])

    try:
        while queue or running:
            while queue and len(running) < jobs:
                args = queue.pop(0)
                if not args[6]:  # not a sweep
                    args = (*args[:8], new_run_id(args[2]))
                parent, child = ctx.Pipe(duplex=False)
                proc = ctx.Process(target=_child, args=(child, args), daemon=True)
                proc.start()
                child.close()
                running[parent] = (proc, args, time.monotonic())
            ready = wait(list(running), timeout=1.0)
            for conn in ready:
                proc, args, _ = running.pop(conn)
                try:
                    result = conn.recv()
                except (EOFError, OSError):
                    proc.join(5)
                    code = proc.exitcode
                    how = (
                        f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
                    )
                    result = lost(args, f"the worker process died ({how}) before reporting")
                else:
                    proc.join(5)
                if "_child_error" in result:
                    result = lost(args, result["_child_error"])
                conn.close()
                collect(result)
            if timeout is not None:
                now = time.monotonic()
                for conn, (proc, args, start) in list(running.items()):
                    if now - start > timeout:
                        _stop([proc])
                        running.pop(conn)
                        conn.close()
                        collect(lost(args, f"timed out after {timeout:g} s"))
    except KeyboardInterrupt:
        queue.clear()
        with _shielded():
            _stop([proc for proc, _, _ in running.values()])
            for conn, (_, args, _) in running.items():
                conn.close()
                discard_unfinished(_folder(args))
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
    While it runs, SIGTERM raises :class:`Terminated` (a ``KeyboardInterrupt``) after the workers are stopped.
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
        (slug, mode, seed, str(out_dir), experiment, threads, record_dir(slug, seed), remote, None)
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

    try:
        with sigterm_as_interrupt():
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
    except KeyboardInterrupt:
        for slug in slugs if sweep else ():  # a sweep stopped before any seed finished leaves no folder
            try:
                sweep_dir(out_dir, slug, mode, sweep_ids[slug]).rmdir()
            except OSError:
                pass
        raise

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
