"""Run one paper's experiment and write ``<out>/<slug>/result.json``.

``run_experiment`` is a plain, picklable function of (slug, mode, seed, out_dir), so the local process pool
and Dask executors can call it unchanged.

result.json schema (``SCHEMA_VERSION`` 1)::

    slug, title, tier, mode ("quick" | "full"), seed,
    status: "ok" | "error",            # "error": the experiment crashed (traceback in "error")
    verdict: "reproduced" | "partial" | "not-reproduced" | null,
    expected_verdict, expected_reason, # declared by the experiment (default "reproduced", "")
    checks: [{name, measured, op, threshold, passed, note}],
    tables: [{name, columns, rows: [{column: value}], caption}],
    figures: [{name, path (relative to the result's folder), caption}],
    timings: {name: seconds}, total_seconds,
    metrics: {name: value}, notes: [str],
    environment: {python, platform, machine, packages: {name: version}, threads},
    started_at (UTC ISO 8601), schema_version
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import random
import sys
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from .. import papers
from .environment import capture_environment
from .run import ProgressSink, Run

SCHEMA_VERSION = 1


class ExperimentNotAvailable(LookupError):
    """The paper is registered but its experiment is not built yet."""


def load_experiment(slug: str):
    """Import and return the ``run(run: Run)`` function of a paper's experiment."""
    paper = papers.get(slug)
    module_name, _, func = paper.experiment.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name and module_name.startswith(err.name):
            raise ExperimentNotAvailable(
                f"{slug!r} has no experiment yet (status: {paper.status}); expected at {paper.experiment}"
            ) from None
        raise
    return getattr(module, func)


@contextmanager
def _thread_limits(threads: int | None) -> Iterator[None]:
    """Cap BLAS (threadpoolctl) and torch intra-op threads for the block; restore them afterwards."""
    if threads is None:
        yield
        return
    from threadpoolctl import threadpool_limits

    torch = None
    if importlib.util.find_spec("torch") is not None:
        import torch  # experiments may import it lazily; cap it before they do
    previous = torch.get_num_threads() if torch is not None else None
    with threadpool_limits(limits=threads):
        if torch is not None:
            torch.set_num_threads(threads)
        try:
            yield
        finally:
            if torch is not None:
                torch.set_num_threads(previous)


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (2**32))  # noqa: NPY002 - seeds legacy global-state users too
    if "torch" in sys.modules:
        sys.modules["torch"].manual_seed(seed)


def run_experiment(
    slug: str,
    mode: str = "quick",
    seed: int = 0,
    out_dir: str | Path = "results",
    progress_sink: ProgressSink | None = None,
    experiment: str | None = None,
    threads: int | None = 1,
) -> dict[str, Any]:
    """Run ``slug``'s experiment; return the result dict and write it to ``out_dir/slug/result.json``.

    A crashing experiment does not raise: its result has ``status == "error"`` and the traceback.
    An unknown slug raises ``KeyError``; a paper without an experiment raises ``ExperimentNotAvailable``.
    ``experiment="package.module:function"`` runs that function instead of the registry's (the harness
    self-test uses it; ``slug`` then only names the output folder).

    ``threads`` caps BLAS and torch threads while the experiment runs (default 1): results then do not depend
    on the machine's core count (multi-threaded reductions change rounding), small torch models do not pay for
    oversubscription, and parallelism comes from running experiments side by side (see ``executor``).
    ``None`` leaves the libraries' defaults.
    """
    if threads is not None and (not isinstance(threads, int) or threads < 1):
        raise ValueError(f"threads must be a positive integer or None, got {threads!r}")
    if experiment is None:
        paper = papers.get(slug)
        title, tier = paper.title, paper.tier
        experiment_fn = load_experiment(slug)
    else:
        module_name, _, func = experiment.partition(":")
        experiment_fn = getattr(importlib.import_module(module_name), func)
        title, tier = slug, "-"
    paper_dir = Path(out_dir) / slug
    run = Run(
        slug=slug, mode=mode, seed=seed, out_dir=paper_dir, progress_sink=progress_sink or ProgressSink()
    )
    started = datetime.now(UTC).isoformat(timespec="seconds")
    t0 = time.perf_counter()
    error = None
    try:
        with _thread_limits(threads):
            _seed_everything(seed)
            experiment_fn(run)
        body = run.to_dict()
    except Exception:
        error = traceback.format_exc()
        body = {
            "slug": slug,
            "mode": mode,
            "seed": seed,
            "verdict": None,
            "expected_verdict": run.expected_verdict,
            "expected_reason": run.expected_reason,
            "checks": [],
            "tables": [],
            "figures": [],
            "timings": run.timings,
            "metrics": run.metrics,
            "notes": run.notes,
        }
    result = {
        "schema_version": SCHEMA_VERSION,
        "title": title,
        "tier": tier,
        "status": "error" if error else "ok",
        **body,
        "total_seconds": time.perf_counter() - t0,
        "environment": capture_environment(),
        "started_at": started,
    }
    if error:
        result["error"] = error
    write_result(result, paper_dir)
    return result


def write_result(result: dict[str, Any], paper_dir: Path) -> Path:
    """Write ``result.json`` (the latest run) and ``result-<mode>.json`` (the latest of that mode)."""
    paper_dir.mkdir(parents=True, exist_ok=True)
    text = json.dumps(result, indent=2, allow_nan=False)
    (paper_dir / f"result-{result['mode']}.json").write_text(text)
    path = paper_dir / "result.json"
    path.write_text(text)
    return path


def load_result(slug: str, out_dir: str | Path = "results", mode: str | None = None) -> dict[str, Any] | None:
    """The latest stored result of ``slug`` (of ``mode`` when given), or None."""
    name = "result.json" if mode is None else f"result-{mode}.json"
    path = Path(out_dir) / slug / name
    if not path.exists():
        return None
    return json.loads(path.read_text())
