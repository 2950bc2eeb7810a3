"""The experiment protocol: a :class:`Run` records what a reproduction experiment measures.

An experiment is a function ``run(run: Run) -> None`` in ``<paper package>/experiment.py``. It generates its
data from ``run.seed``, fits our method and every baseline the paper names on the same data, and records:

- ``run.table(rows)``: rows of method x metric;
- ``run.check(name, measured, op, threshold)``: each pass condition of the paper's digest, with the threshold
  fixed in the experiment's source before the run (never computed from the measurement);
- ``run.figure(fig, name)``: the plot a reader would rather look at than read;
- ``run.timer(name)``: wall-clock timings (the whole run is timed automatically).

The verdict follows from the checks alone: ``reproduced`` when all pass, ``not-reproduced`` when none
pass, ``partial`` otherwise. An experiment whose claim honestly does not reproduce says so up front with
``run.expect("partial", reason=...)``; the test suite then asserts that verdict instead of ``reproduced``.
"""

from __future__ import annotations

import math
import operator
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

MODES = ("quick", "full")
VERDICTS = ("reproduced", "partial", "not-reproduced")

_OPS: dict[str, Callable[[float, Any], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    ">": operator.gt,
    "<": operator.lt,
    "==": operator.eq,
    "in": lambda x, bounds: bounds[0] <= x <= bounds[1],
}


def _jsonable(value: Any) -> Any:
    """Numbers and containers as plain JSON values; NaN and inf become None (JSON has neither)."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist())
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, str):
        return value
    return str(value)


@dataclass
class Check:
    """One pass condition of a paper's reproduction check: ``measured op threshold``."""

    name: str
    measured: float | None
    op: str
    threshold: float | tuple[float, float]
    passed: bool
    note: str = ""

    def describe(self) -> str:
        m = "nan" if self.measured is None else f"{self.measured:.4g}"
        if self.op == "in":
            lo, hi = self.threshold  # type: ignore[misc]
            cond = f"{m} in [{lo:.4g}, {hi:.4g}]"
        else:
            cond = f"{m} {self.op} {self.threshold:.4g}"
        return f"{'PASS' if self.passed else 'FAIL'}  {self.name}: {cond}"


@dataclass
class Table:
    name: str
    columns: list[str]
    rows: list[dict[str, Any]]
    caption: str = ""


@dataclass
class Figure:
    name: str
    path: str  # relative to the run's output folder
    caption: str = ""


class ProgressSink:
    """Where a run reports progress; the CLI plugs in a rich progress bar, tests use this silent default."""

    def start(self, description: str, total: int | None) -> Any:
        return None

    def advance(self, task: Any, n: int = 1) -> None:
        pass

    def finish(self, task: Any) -> None:
        pass

    def log(self, message: str) -> None:
        pass


@dataclass
class Run:
    """State of one reproduction run of one paper.

    Parameters
    ----------
    slug : the paper's registry slug.
    mode : ``"quick"`` (about a minute on 2 cores; used by CI) or ``"full"`` (paper-like scale).
    seed : master seed; experiments derive every random stream from it.
    out_dir : folder for this paper's outputs (``results/<slug>``).
    """

    slug: str
    mode: str = "quick"
    seed: int = 0
    out_dir: Path = Path("results")
    progress_sink: ProgressSink = field(default_factory=ProgressSink)
    checks: list[Check] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    expected_verdict: str = "reproduced"
    expected_reason: str = ""

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if not isinstance(self.seed, (int, np.integer)) or self.seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {self.seed!r}")
        self.out_dir = Path(self.out_dir)

    # --- mode helpers ------------------------------------------------------------------------------
    @property
    def quick(self) -> bool:
        return self.mode == "quick"

    @property
    def full(self) -> bool:
        return self.mode == "full"

    def pick(self, quick: Any, full: Any) -> Any:
        """The value for this run's mode, e.g. ``n = run.pick(quick=6000, full=20000)``."""
        return quick if self.quick else full

    @property
    def rng(self) -> np.random.Generator:
        """A fresh generator seeded from the run's seed (same stream on every access)."""
        return np.random.default_rng(self.seed)

    def seeds(self, n: int) -> list[int]:
        """``n`` distinct, reproducible integer seeds derived from the run's seed."""
        return [int(s) for s in np.random.SeedSequence(self.seed).generate_state(n) % (2**31 - 1)]

    # --- recording -----------------------------------------------------------------------------------
    def check(
        self,
        name: str,
        measured: float,
        op: str,
        threshold: float | tuple[float, float],
        *,
        note: str = "",
    ) -> bool:
        """Record the pass condition ``measured op threshold`` and return whether it holds.

        ``op`` is one of ``>= <= > < ==`` or ``in`` (``threshold = (lo, hi)``, inclusive). A NaN
        measurement never passes.
        """
        if op not in _OPS:
            raise ValueError(f"op must be one of {sorted(_OPS)}, got {op!r}")
        if any(c.name == name for c in self.checks):
            raise ValueError(f"check {name!r} recorded twice")
        if op == "in":
            if not (isinstance(threshold, (tuple, list)) and len(threshold) == 2):
                raise ValueError("op 'in' needs threshold=(lo, hi)")
            threshold = (float(threshold[0]), float(threshold[1]))
        else:
            threshold = float(threshold)  # type: ignore[arg-type]
        value = float(measured)
        finite = math.isfinite(value) or (math.isinf(value) and op != "==")
        passed = bool(finite and not math.isnan(value) and _OPS[op](value, threshold))
        self.checks.append(Check(name, value if math.isfinite(value) else None, op, threshold, passed, note))
        self.log(self.checks[-1].describe())
        return passed

    def table(self, rows: Sequence[Mapping[str, Any]], name: str = "results", caption: str = "") -> None:
        """Record a table (one mapping per row; columns in first-seen order)."""
        if not rows:
            raise ValueError("table needs at least one row")
        if any(t.name == name for t in self.tables):
            raise ValueError(f"table {name!r} recorded twice")
        columns: list[str] = []
        for row in rows:
            for key in row:
                if key not in columns:
                    columns.append(str(key))
        self.tables.append(Table(name, columns, [_jsonable(dict(r)) for r in rows], caption))

    def figure(self, fig: Any, name: str, caption: str = "") -> Path:
        """Save a matplotlib figure as ``<out_dir>/<name>.png`` and close it."""
        import matplotlib.pyplot as plt

        self.out_dir.mkdir(parents=True, exist_ok=True)
        path = self.out_dir / f"{name}.png"
        fig.savefig(path, dpi=110, bbox_inches="tight")
        plt.close(fig)
        self.figures.append(Figure(name, path.name, caption))
        return path

    def metric(self, name: str, value: Any) -> None:
        """Record an extra measurement that is reported but is not a pass condition."""
        self.metrics[name] = _jsonable(value)

    def note(self, text: str) -> None:
        """A sentence for the report (e.g. what quick mode scales down, or an honest caveat)."""
        self.notes.append(text)
        self.log(text)

    def expect(self, verdict: str, reason: str) -> None:
        """Declare, before measuring, that the claim does not fully reproduce here, and why."""
        if verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {verdict!r}")
        if verdict != "reproduced" and not reason.strip():
            raise ValueError("an expected verdict other than 'reproduced' needs a written reason")
        self.expected_verdict = verdict
        self.expected_reason = reason

    @contextmanager
    def timer(self, name: str) -> Iterator[None]:
        """Time a block; the seconds accumulate under ``timings[name]``."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.timings[name] = self.timings.get(name, 0.0) + time.perf_counter() - t0

    def progress(self, iterable: Iterable[Any], description: str, total: int | None = None) -> Iterator[Any]:
        """Iterate with a progress bar when run from the CLI."""
        if total is None and hasattr(iterable, "__len__"):
            total = len(iterable)  # type: ignore[arg-type]
        task = self.progress_sink.start(f"{self.slug}: {description}", total)
        try:
            for item in iterable:
                yield item
                self.progress_sink.advance(task)
        finally:
            self.progress_sink.finish(task)

    def log(self, message: str) -> None:
        self.progress_sink.log(f"[{self.slug}] {message}")

    # --- outcome ----------------------------------------------------------------------------------------
    @property
    def verdict(self) -> str:
        if not self.checks:
            raise RuntimeError(f"experiment {self.slug!r} recorded no checks")
        n_pass = sum(c.passed for c in self.checks)
        if n_pass == len(self.checks):
            return "reproduced"
        return "not-reproduced" if n_pass == 0 else "partial"

    def to_dict(self) -> dict[str, Any]:
        return _jsonable(
            {
                "slug": self.slug,
                "mode": self.mode,
                "seed": int(self.seed),
                "verdict": self.verdict,
                "expected_verdict": self.expected_verdict,
                "expected_reason": self.expected_reason,
                "checks": [asdict(c) for c in self.checks],
                "tables": [asdict(t) for t in self.tables],
                "figures": [asdict(f) for f in self.figures],
                "timings": self.timings,
                "metrics": self.metrics,
                "notes": self.notes,
            }
        )
