"""Run one paper's experiment and write its run record.

``run_experiment`` is a plain, picklable function of (slug, mode, seed, out_dir), so the local process pool
and Dask executors call it unchanged.

result.json schema (``SCHEMA_VERSION`` 2; see :mod:`neurips26.harness.records` for the folder layout)::

    schema_version, run_id, slug, title, tier, mode ("quick" | "full"), seed,
    status: "ok" | "error",            # "error": crashed, a sanity check failed, or a declared check is missing
    verdict: "reproduced" | "partial" | "not-reproduced" | "inconclusive" | null,
    expected_verdict,                  # what the claims declaration predicts for this mode
    claims: {source, digest},          # the declaration the run was checked against
    checks: [{id, kind, op, threshold, measured, outcome, expected, values, interval, note, measures}],
    tables: [{name, columns, rows: [{column: value}], caption}],
    figures: [{name, path (relative to the run folder), caption}],
    timings: {name: seconds}, total_seconds,
    metrics: {name: value}, params: {name: value}, notes: [str],
    environment: {python, platform, machine, processor, git: {commit, dirty}, packages, threads},
    started_at, finished_at (UTC ISO 8601), error (when status is "error")
"""

from __future__ import annotations

import base64
import importlib
import importlib.util
import os
import random
import shutil
import sys
import time
import traceback
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from .. import papers
from .claims import Claims, ClaimsError, claims_at
from .deps import MissingDependency, extra_of, hint, imports_of, missing_imports, source_of
from .environment import capture_environment, thread_state
from .evidence import source_hashes
from .records import SCHEMA_VERSION, commit_run, new_run_dir, new_run_id, write_json_atomic
from .run import ProgressSink, Run

__all__ = [
    "SCHEMA_VERSION",
    "ExperimentNotAvailable",
    "MissingDependency",
    "check_runnable",
    "load_experiment",
    "run_experiment",
]
_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
_NO_POT_TORCH = "POT_BACKEND_DISABLE_PYTORCH"


class ExperimentNotAvailable(LookupError):
    """The paper is registered but its experiment (or its claims declaration) is not built yet."""


def _use_agg() -> None:
    """Experiments only write PNGs: the non-interactive backend, set once before any experiment imports pyplot."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    if "matplotlib" in sys.modules:
        sys.modules["matplotlib"].use("Agg")


def _import(module_name: str, slug: str) -> Any:
    _use_agg()
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        missing = err.name or ""
        if missing == module_name or module_name.startswith(missing + "."):
            raise ExperimentNotAvailable(
                f"{slug!r} has no experiment yet; expected at {module_name}"
            ) from None
        if missing.startswith("neurips26"):
            raise
        raise MissingDependency(f"{slug}: {hint(missing, _extra(slug, module_name))}") from err


def _extra(slug: str, module_name: str) -> str | None:
    """The extra a hint names: that of the experiment's field, else that of the paper the slug names."""
    return extra_of(module_name) or (papers.get(slug).field if slug in papers.slugs() else None)


def _missing_at_run_time(err: BaseException, slug: str, module_name: str) -> str | None:
    """The one-line hint for a dependency an experiment imports inside ``run()`` and that is not installed."""
    if not isinstance(err, ModuleNotFoundError) or not err.name or err.name.startswith("neurips26"):
        return None
    top = err.name.partition(".")[0]
    try:
        if importlib.util.find_spec(top) is not None:  # installed: a bug, not a missing extra
            return None
    except (ImportError, ValueError):
        return None
    frames = [f for f in traceback.extract_tb(err.__traceback__) if not f.filename.startswith("<")]
    where = f" (imported at {Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
    return f"{slug}: {hint(err.name, _extra(slug, module_name))}{where}"


def _experiment_module(slug: str, experiment: str | None) -> str:
    return (experiment or papers.get(slug).experiment).partition(":")[0]


def check_runnable(slug: str, experiment: str | None = None) -> None:
    """Raise what :func:`resolve` would for a paper without an experiment or with a missing dependency, but
    read from the files alone: nothing is imported, so ``run --all`` starts at once and the process that
    dispatches the workers stays small. A dependency imported only inside ``run()`` is caught when it runs."""
    module_name = _experiment_module(slug, experiment)
    if experiment is None and papers.get(slug).claims is None:
        raise ExperimentNotAvailable(
            f"{slug!r} has no claims declaration yet ({papers.get(slug).claims_path})"
        )
    path = source_of(module_name)
    if path is None:
        raise ExperimentNotAvailable(f"{slug!r} has no experiment yet; expected at {module_name}")
    if experiment is not None and not path.with_name("claims.toml").exists():
        raise ExperimentNotAvailable(f"{experiment}: no claims.toml beside {path}")
    missing = missing_imports(module_name)
    if missing:
        raise MissingDependency(f"{slug}: {hint(missing[0], _extra(slug, module_name))}")


def resolve(slug: str, experiment: str | None = None) -> tuple[Any, Claims, str, str]:
    """The experiment function, its claims declaration, title and tier.

    ``experiment="package.module:function"`` runs that function instead of the registry's (the harness
    self-test uses it); its declaration is the ``claims.toml`` beside that module.
    """
    if experiment is None:
        paper = papers.get(slug)
        claims = paper.claims
        if claims is None:
            raise ExperimentNotAvailable(f"{slug!r} has no claims declaration yet ({paper.claims_path})")
        module_name, _, func = paper.experiment.partition(":")
        module = _import(module_name, slug)
        return getattr(module, func), claims, paper.title, paper.tier
    module_name, _, func = experiment.partition(":")
    module = _import(module_name, slug)
    path = Path(module.__file__).with_name("claims.toml")
    claims = claims_at(path)
    if claims is None:
        raise ExperimentNotAvailable(f"{experiment}: no claims.toml beside {module.__file__}")
    return getattr(module, func or "run"), claims, slug, "-"


def load_experiment(slug: str) -> Any:
    """Import and return the ``run(run: Run)`` function of a paper's experiment."""
    return resolve(slug)[0]


class Terminated(KeyboardInterrupt):
    """SIGTERM, taken as Ctrl-C: the same clean stop (queued tasks cancelled, running ones stopped, no record)."""


# Stop signals received while an experiment runs. Library code may catch the KeyboardInterrupt a stop raises and
# go on (scikit-learn's MLP warns "Training interrupted by user" and returns the half-trained model), so the
# runner does not trust the experiment's normal return: a stop noted here turns it into no record.
_STOPS: list[KeyboardInterrupt] = []


def note_stop(stop: KeyboardInterrupt) -> KeyboardInterrupt:
    """Remember a stop signal (see ``_STOPS``); returns it, to be raised by the handler."""
    _STOPS.append(stop)
    return stop


@contextmanager
def _interrupts_noted() -> Iterator[None]:
    """Ctrl-C is noted as well as raised while the block runs (main thread, default handler only)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread() or (
        signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield
        return

    def interrupted(signum: int, frame: Any) -> None:
        raise note_stop(KeyboardInterrupt(f"interrupted by signal {signum}"))

    signal.signal(signal.SIGINT, interrupted)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@contextmanager
def _thread_limits(threads: int | None, wants_torch: bool = False) -> Iterator[None]:
    """Cap BLAS (threadpoolctl) and torch intra-op threads for the block; restore them afterwards.

    torch is imported here only for an experiment that imports it somewhere (``wants_torch``, read from its
    source), so that a lazy import inside ``run()`` is capped and seeded too; a numpy-only paper never pays
    the seconds torch takes to import. The OpenMP/BLAS variables are set for the block as well, so that a
    pool loaded later (an import the source scan could not see) starts capped.
    """
    if threads is None:
        yield
        return
    from threadpoolctl import threadpool_limits

    if wants_torch and "torch" not in sys.modules and importlib.util.find_spec("torch") is not None:
        importlib.import_module("torch")
    torch = sys.modules.get("torch")
    previous = torch.get_num_threads() if torch is not None else None
    with _environ(dict.fromkeys(_THREAD_VARS, str(threads))), threadpool_limits(limits=threads):
        if torch is not None:
            torch.set_num_threads(threads)
        try:
            yield
        finally:
            if torch is not None:
                torch.set_num_threads(previous)


@contextmanager
def _environ(values: dict[str, str]) -> Iterator[None]:
    """Set environment variables for the block; restore them afterwards."""
    saved = {var: os.environ.get(var) for var in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for var, value in saved.items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (2**32))  # noqa: NPY002 - seeds legacy global-state users too
    if "torch" in sys.modules:
        sys.modules["torch"].manual_seed(seed)


def _empty_body(slug: str, mode: str, seed: int) -> dict[str, Any]:
    """The record fields of a run that failed before its experiment started (readers need every one)."""
    return {
        "slug": slug,
        "mode": mode,
        "seed": int(seed),
        "verdict": None,
        "expected_verdict": None,
        "checks": [],
        "tables": [],
        "figures": [],
        "timings": {},
        "metrics": {},
        "params": {},
        "notes": [],
    }


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def run_experiment(
    slug: str,
    mode: str = "quick",
    seed: int = 0,
    out_dir: str | Path = "results",
    progress_sink: ProgressSink | None = None,
    experiment: str | None = None,
    threads: int | None = 1,
    record_dir: str | Path | None = None,
    embed_files: bool = False,
    run_id: str | None = None,
) -> dict[str, Any]:
    """Run ``slug``'s experiment; write and return its run record.

    The record goes to a new folder ``<out_dir>/<slug>/<mode>/<run-id>/`` and the mode's ``latest`` pointer is
    moved to it once it is complete; with ``record_dir`` (seed sweeps) it goes to that folder and no pointer
    moves. A crashing experiment does not raise: its record has ``status == "error"``, the traceback, and the
    checks and tables recorded before the crash. An unknown slug raises ``KeyError``.

    ``threads`` caps BLAS and torch threads while the experiment runs (default 1): results then do not depend
    on the machine's core count (multi-threaded reductions change rounding), small torch models do not pay for
    oversubscription, and parallelism comes from running experiments side by side (see ``executor``).
    ``None`` leaves the libraries' defaults. ``embed_files`` returns the figures' bytes in ``_files`` (for
    executors whose workers do not share the caller's disk). ``run_id`` names the run folder (the local
    process pool picks it, so that it can remove the folder of a worker it had to kill).

    Interrupted (Ctrl-C, or SIGTERM where the caller turns it into ``KeyboardInterrupt``), it writes no record,
    removes the folder it made, leaves the pointer alone and re-raises; the experiment's ``finally`` blocks run.
    """
    if mode not in ("quick", "full"):
        raise ValueError(f"mode must be 'quick' or 'full', got {mode!r}")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise ValueError(f"threads must be a positive integer or None, got {threads!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")  # before a folder is made
    if experiment is None:
        papers.get(slug)  # unknown slug: KeyError before anything is written
    started = _now()
    t0 = time.perf_counter()
    made = record_dir is None or not Path(record_dir).exists()
    if record_dir is None:
        run_dir = new_run_dir(out_dir, slug, mode, seed, run_id)
    else:
        run_dir = Path(record_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
    title, tier = slug, "-"
    run: Run | None = None
    error: str | None = None
    threads_in_effect: dict[str, Any] | None = None
    claims: Claims | None = None
    scoped = ExitStack()
    try:
        module_name = _experiment_module(slug, experiment)
        wants_torch = "torch" in imports_of(module_name, lazy=True, optional=True)
        if not wants_torch and _NO_POT_TORCH not in os.environ:
            # POT imports torch for its torch backend when torch is installed: seconds a paper without torch
            # code would pay on every run (its numpy arrays take the numpy backend either way)
            scoped.enter_context(_environ({_NO_POT_TORCH: "1"}))
        experiment_fn, claims, title, tier = resolve(slug, experiment)
        run = Run(
            slug=slug,
            claims=claims,
            mode=mode,
            seed=seed,
            out_dir=run_dir,
            progress_sink=progress_sink or ProgressSink(),
        )
        if not claims.for_mode(mode):
            raise ClaimsError(f"{slug}: no check is declared for {mode} mode")
        with _thread_limits(threads, wants_torch):
            _seed_everything(seed)
            threads_in_effect = thread_state()
            threads_in_effect["requested"] = threads
            stops = len(_STOPS)
            try:
                with _interrupts_noted():
                    experiment_fn(run)
                if len(_STOPS) > stops:  # a stop that library code caught and carried on from
                    raise _STOPS[-1]
            finally:
                if "torch" in sys.modules and "torch" not in threads_in_effect:  # imported by the run
                    threads_in_effect["torch"] = sys.modules["torch"].get_num_threads()
        problems = run.problems()
        if problems:
            error = "the run does not match its declaration:\n- " + "\n- ".join(problems)
    except Exception as err:
        if isinstance(err, (ExperimentNotAvailable, MissingDependency)):
            error = str(err)
        else:
            error = (
                _missing_at_run_time(err, slug, _experiment_module(slug, experiment))
                or traceback.format_exc()
            )
    except BaseException:  # Ctrl-C or SIGTERM: no record, and the latest pointer stays where it was
        if made:
            shutil.rmtree(run_dir, ignore_errors=True)
        raise
    finally:
        scoped.close()
    body = run.to_dict() if run is not None else _empty_body(slug, mode, seed)
    if error:
        body["verdict"] = None
    result = {
        "schema_version": SCHEMA_VERSION,
        "run_id": run_dir.name if record_dir is None else new_run_id(seed),
        "title": title,
        "tier": tier,
        "status": "error" if error else "ok",
        **body,
        "claims": {"source": claims.source, "digest": claims.digest} if claims else None,
        "sources": source_hashes(slug),
        "total_seconds": time.perf_counter() - t0,
        "environment": capture_environment(threads_in_effect),
        "started_at": started,
        "finished_at": _now(),
    }
    if error:
        result["error"] = error
    write_json_atomic(run_dir / "result.json", result)
    if record_dir is None:
        commit_run(out_dir, slug, mode, run_dir)
    if embed_files:
        result["_files"] = {
            f["path"]: base64.b64encode((run_dir / f["path"]).read_bytes()).decode()
            for f in result.get("figures", [])
            if (run_dir / f["path"]).exists()
        }
    return result
