"""The experiment protocol: a :class:`Run` records what a reproduction experiment measures.

An experiment is a function ``run(run: Run) -> None`` in ``<paper package>/experiment.py``; its checks are
declared beforehand in ``claims.toml`` beside it (see :mod:`neurips26.harness.claims`). It generates its data
from ``run.seed``, fits our method and every baseline the paper names on the same data, and records:

- ``run.param(name, quick=..., full=...)``: a size or setting, chosen by mode and recorded;
- ``run.table(rows)``: rows of method x metric;
- ``run.check(id, measured)``: the measurement of a declared check, one value or one per seed/replicate
  (op, threshold, kind and the expected outcome come from the declaration, never from the experiment);
- ``run.metric(name, value)``: every number a reason cites, and anything else worth keeping;
- ``run.figure(fig, name)``: the plot a reader would rather look at than read;
- ``with run.timer("fit") as t: ...; t.seconds``: wall-clock timings (the whole run is timed as well).

The verdict follows from the claim checks alone; a failing sanity check, a declared check never recorded, or an
undeclared one makes the run an error, not a verdict. A precondition that does not pass makes the claim checks it
gates inconclusive (their measured outcome is kept beside them), whichever order they were recorded in.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from .claims import MODES, Claims, ClaimsError, MeasuredCheck, verdict_from

_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def jsonable(value: Any) -> Any:
    """Numbers and containers as plain JSON values. JSON has neither NaN nor inf: NaN becomes None, inf and -inf
    the strings "inf" and "-inf" (a None would read as "not recorded", an infinite loss is a measurement)."""
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return value if math.isfinite(value) else None if math.isnan(value) else str(value)
    if value is None or isinstance(value, str):
        return value
    return str(value)


def _number(value: float) -> float | str:
    """A measured value for JSON: finite floats as they are, inf/-inf/nan as strings (never silently null)."""
    return value if math.isfinite(value) else str(value)


@dataclass
class Table:
    name: str
    columns: list[str]
    rows: list[dict[str, Any]]
    caption: str = ""


@dataclass
class Figure:
    name: str
    path: str  # relative to the run's record folder
    caption: str = ""


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


class Timer:
    """Seconds spent in a ``with`` block: ``with Timer() as t: ...; t.seconds``.

    ``clock="wall"`` (default) measures elapsed time; ``clock="cpu"`` measures this process's CPU time, which a
    busy machine inflates far less (use it for single-threaded work whose cost, not latency, is the claim).
    """

    def __init__(self, clock: str = "wall") -> None:
        if clock not in CLOCKS:
            raise ValueError(f"clock must be one of {sorted(CLOCKS)}, got {clock!r}")
        self.clock = clock
        self.seconds = math.nan
        self._t0 = 0.0

    def __enter__(self) -> Timer:
        self._t0 = CLOCKS[self.clock]()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.seconds = CLOCKS[self.clock]() - self._t0


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


_SAME = object()  # run.param without a full-mode value


@dataclass
class Run:
    """State of one reproduction run of one paper.

    Parameters
    ----------
    slug : the paper's registry slug.
    claims : the paper's declaration (``claims.toml``); every recorded check must be declared in it.
    mode : ``"quick"`` (at most about 30 s on one core; used by CI) or ``"full"`` (paper-like scale).
    seed : master seed; experiments derive every random stream from it.
    out_dir : this run's record folder (figures are written here).
    """

    slug: str
    claims: Claims
    mode: str = "quick"
    seed: int = 0
    out_dir: Path = Path("results")
    progress_sink: ProgressSink = field(default_factory=ProgressSink)
    checks: list[MeasuredCheck] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)) or self.seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {self.seed!r}")
        if not isinstance(self.claims, Claims):
            raise TypeError(f"claims must be a Claims declaration, got {type(self.claims).__name__}")
        self.seed = int(self.seed)
        self.out_dir = Path(self.out_dir)

    # --- mode helpers ------------------------------------------------------------------------------
    @property
    def quick(self) -> bool:
        return self.mode == "quick"

    @property
    def full(self) -> bool:
        return self.mode == "full"

    def pick(self, quick: Any, full: Any) -> Any:
        """The value for this run's mode (not recorded; prefer :meth:`param` for sizes and settings)."""
        return quick if self.quick else full

    def param(self, name: str, quick: Any, full: Any = _SAME) -> Any:
        """A size or setting by mode, recorded under ``params``: ``n = run.param("n", quick=6000, full=20000)``.

        Without ``full`` the setting does not change with the mode; ``full=None`` means None in full mode (say,
        no limit), not the quick value.
        """
        if name in self.params:
            raise ValueError(f"param {name!r} recorded twice")
        value = quick if (self.quick or full is _SAME) else full
        self.params[name] = jsonable(value)
        return value

    @cached_property
    def rng(self) -> np.random.Generator:
        """The run's generator, seeded from ``seed``; one stream, so successive draws differ."""
        return np.random.default_rng(self.seed)

    def seeds(self, n: int) -> list[int]:
        """``n`` distinct, reproducible integer seeds derived from the run's seed (for replicates)."""
        if not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"n must be a positive integer, got {n!r}")
        return [int(s) for s in np.random.SeedSequence(self.seed).generate_state(int(n)) % (2**31 - 1)]

    # --- recording -----------------------------------------------------------------------------------
    def check(self, check_id: str, measured: float | Sequence[float], *, note: str = "") -> str:
        """Record the measurement of the declared check ``check_id``; return its outcome.

        ``measured`` is one value, or one value per seed/replicate: then the median is reported and the outcome
        is decided on the min-max interval of the values (``pass`` / ``fail`` / ``inconclusive``).
        """
        spec = self.claims.get(check_id)
        if self.mode not in spec.modes:
            raise ClaimsError(f"check {check_id!r} is declared for {list(spec.modes)}, not {self.mode} mode")
        if any(c.id == check_id for c in self.checks):
            raise ValueError(f"check {check_id!r} recorded twice")
        values = np.atleast_1d(np.asarray(measured, dtype=float))
        if values.ndim != 1 or values.size == 0:
            raise ValueError(f"check {check_id!r}: measured must be a number or a non-empty 1-D sequence")
        outcome = spec.outcome([float(v) for v in values])
        finite = values[~np.isnan(values)]
        centre = float(np.median(finite)) if finite.size else math.nan
        is_seq = not np.isscalar(measured) and np.ndim(measured) > 0
        self.checks.append(
            MeasuredCheck(
                id=check_id,
                kind=spec.kind,
                op=spec.op,
                threshold=spec.threshold,
                measured=_number(centre),  # type: ignore[arg-type]
                outcome=outcome,
                expected=spec.expect[self.mode],
                values=[_number(float(v)) for v in values] if is_seq else None,  # type: ignore[misc]
                interval=(_number(float(np.min(finite))), _number(float(np.max(finite))))  # type: ignore[arg-type]
                if is_seq and finite.size
                else None,
                note=note,
                measures=spec.measures,
                measured_outcome=outcome,
            )
        )
        self._apply_preconditions()
        self.log(describe(self.checks[-1]))
        if spec.kind == "precondition" and outcome != "pass":
            self.log(
                f"precondition {check_id!r} unmet: the claims it gates are inconclusive ({', '.join(spec.gates)})"
            )
        return self.checks[-1].outcome

    def _apply_preconditions(self) -> None:
        """Make every claim check gated by an unmet (recorded) precondition inconclusive; idempotent."""
        preconditions = {c.id: c for c in self.checks if c.kind == "precondition"}
        for c in self.checks:
            if c.kind != "claim":
                continue
            unmet = [
                preconditions[p.id]
                for p in self.claims.gated_by(c.id, self.mode)
                if p.id in preconditions and preconditions[p.id].outcome != "pass"
            ]
            c.outcome = "inconclusive" if unmet else c.measured_outcome
            c.gated_by = [
                {"id": p.id, "measured": p.measured, "condition": _condition(p), "outcome": p.outcome}
                for p in unmet
            ] or None

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
        self.tables.append(Table(name, columns, [jsonable(dict(r)) for r in rows], caption))

    def figure(self, fig: Any, name: str, caption: str = "") -> Path:
        """Save a matplotlib figure as ``<out_dir>/<name>.png`` (this run's own folder) and close it."""
        import matplotlib.pyplot as plt

        if not _SAFE_NAME.match(name):
            raise ValueError(f"figure name must be a plain file stem (letters, digits, _ . -), got {name!r}")
        if any(f.name == name for f in self.figures):
            raise ValueError(f"figure {name!r} recorded twice")
        self.out_dir.mkdir(parents=True, exist_ok=True)
        path = self.out_dir / f"{name}.png"
        fig.savefig(path, dpi=110, bbox_inches="tight")
        plt.close(fig)
        self.figures.append(Figure(name, path.name, caption))
        return path

    def metric(self, name: str, value: Any) -> None:
        """Record a measurement that is reported (and may be cited by a reason) but is not a check."""
        self.metrics[name] = jsonable(value)

    def note(self, text: str) -> None:
        """A sentence for the report (e.g. an honest caveat about this run)."""
        self.notes.append(text)
        self.log(text)

    @contextmanager
    def timer(self, name: str | None = None, clock: str = "wall") -> Iterator[Timer]:
        """Time a block: ``with run.timer("fit") as t: ...``; ``t.seconds`` after it, and the seconds
        accumulate under ``timings[name]`` when a name is given (``clock="cpu"``: process CPU time)."""
        t = Timer(clock)
        with t:
            yield t
        if name is not None:
            self.timings[name] = self.timings.get(name, 0.0) + t.seconds

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
    def problems(self) -> list[str]:
        """What makes this run an error rather than a verdict: failed sanity checks, missing checks."""
        out = []
        recorded = {c.id for c in self.checks}
        missing = [c.id for c in self.claims.for_mode(self.mode) if c.id not in recorded]
        if missing:
            out.append(f"declared checks not recorded in {self.mode} mode: {', '.join(missing)}")
        for c in self.checks:
            if c.kind == "sanity" and c.outcome != "pass":
                out.append(
                    f"sanity check {c.id!r} {c.outcome}ed (measured {c.measured} {c.op} {c.threshold}): "
                    "it holds by construction, so this is a bug, not a verdict"
                )
        return out

    @property
    def verdict(self) -> str:
        self._apply_preconditions()
        outcomes = [c.outcome for c in self.checks if c.kind == "claim"]
        if not outcomes:
            raise RuntimeError(f"experiment {self.slug!r} recorded no claim checks")
        return verdict_from(outcomes)

    def reason_values(self) -> dict[str, Any]:
        """What a reason template may cite: params, then metrics, then checks by id (their measured value)."""
        values: dict[str, Any] = dict(self.params)
        values.update(self.metrics)
        values.update({c.id: c.measured for c in self.checks})
        return values

    def to_dict(self) -> dict[str, Any]:
        self._apply_preconditions()
        try:
            verdict = self.verdict
        except RuntimeError:
            verdict = None
        return {
            "slug": self.slug,
            "mode": self.mode,
            "seed": int(self.seed),
            "verdict": verdict,
            "expected_verdict": self.claims.expected_verdict(self.mode),
            "checks": [asdict(c) for c in self.checks],  # measured values keep "inf"/"nan" as strings
            "tables": [asdict(t) for t in self.tables],
            "figures": [asdict(f) for f in self.figures],
            "timings": jsonable(self.timings),
            "metrics": self.metrics,
            "params": self.params,
            "notes": list(self.notes),
        }


def _condition(c: MeasuredCheck | Mapping[str, Any]) -> str:
    """``79.2 >= 10`` or ``0.9 in [0.6, 1.4]``: the measured value against the declared bar."""
    d = asdict(c) if isinstance(c, MeasuredCheck) else dict(c)
    m = fmt_number(d.get("measured"))
    if d["op"] == "in":
        lo, hi = d["threshold"]
        return f"{m} in [{lo:.4g}, {hi:.4g}]"
    return f"{m} {d['op']} {d['threshold']:.4g}"


def unmet_preconditions(c: MeasuredCheck | Mapping[str, Any]) -> str:
    """``precondition unmet: teacher_accuracy 0.187 >= 0.3 (fail)``, or "" when nothing gated the check."""
    gated = (asdict(c) if isinstance(c, MeasuredCheck) else dict(c)).get("gated_by") or []
    if not gated:
        return ""
    return "precondition unmet: " + "; ".join(f"{g['id']} {g['condition']} ({g['outcome']})" for g in gated)


def describe(c: MeasuredCheck | Mapping[str, Any]) -> str:
    """``PASS speedup: 79.2 >= 10`` (with the seed interval when there is one, and any unmet precondition)."""
    d = asdict(c) if isinstance(c, MeasuredCheck) else dict(c)
    cond = _condition(d)
    if d.get("interval"):
        lo, hi = d["interval"]
        cond += f" (seed interval [{fmt_number(lo)}, {fmt_number(hi)}], n = {len(d.get('values') or [])})"
    mark = {"pass": "PASS", "fail": "FAIL", "inconclusive": "INCONCLUSIVE"}.get(d["outcome"], d["outcome"])
    unmet = unmet_preconditions(d)
    if unmet:
        measured = d.get("measured_outcome") or "?"
        cond += f" [{unmet}; measured alone: {measured}]"
    return f"{mark}  {d['id']}: {cond}"


def fmt_number(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return f"{float(value):.4g}"
    return str(value)
