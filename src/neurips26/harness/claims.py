"""Claims declarations: a paper's checks, written down as data before anything runs.

Each paper keeps a ``claims.toml`` beside its ``experiment.py``. It is read with the standard library only, so
``neurips26 show`` and ``neurips26 list`` print it without importing the implementation (or torch)::

    quick = "what quick mode scales down, in one sentence"
    deviations = ["every departure from the digest (data set, parameter, formula), one string each"]

    [[checks]]
    id = "speedup"                      # what experiment.py passes to run.check(id, measured)
    measures = "wall-time ratio full-batch / mini-batch at n = 20000"
    kind = "claim"                      # claim: evidence; sanity: holds by construction (failing = a bug);
                                        # precondition: must hold before the claims it gates can be decided
    op = ">="                           # >= <= > < == or "in" with threshold = [lo, hi]
    threshold = 10.0                    # the digest's, unchanged
    modes = ["quick", "full"]           # optional; default both
    expect = "pass"                     # or {quick = "pass", full = "fail"}; pass | fail | inconclusive
    reason = "... {ari_linear:.2f} ..." # required unless every expectation is pass
    explained_by = ["ari_linear"]       # recorded metrics/params/checks that back the reason
    confirmed_on = [3, 4, 5]            # optional: held-out seeds on which the quick expectation was confirmed

    [[checks]]
    id = "model_past_chance"
    measures = "test accuracy of the trained model minus the majority-class rate"
    kind = "precondition"
    op = ">="
    threshold = 0.1
    gates = ["speedup"]                 # the claim checks that are inconclusive unless this passes
    expect = "pass"

A reason is a template: ``{name}`` or ``{name:.3g}`` is filled in from the run's recorded checks, metrics and
params when the report is written, so a reason can only state numbers the run records. A decimal number or a
percentage written literally into a reason is rejected.

Outcomes. One measured value gives *pass* or *fail*. A sequence of per-seed (or per-replicate) values gives
*pass* when every value passes (the whole min-max seed interval lies on the passing side), *fail* when every
value fails, and *inconclusive* otherwise. A NaN value (nothing could be measured, say an empty set) makes the
check *inconclusive*: it is neither evidence for the claim nor against it. An infinite value is a measurement
(a diverged loss) and is compared like any other. The min-max interval is deliberate: with the 3-10 seeds a quick run
can afford, a bootstrap interval of the median is no tighter and hides the worst seed.

Preconditions. A claim about a trained model is decided only on a trained model: a ``precondition`` check states
what must hold first (a model past chance by a margin, a baseline that beats the trivial predictor, a codebook in
use, a loss at its plateau) and names the claim checks it ``gates``. When a precondition does not pass (it fails, or
is itself inconclusive), every check it gates is *inconclusive (precondition unmet)* whatever it measured; the run
records the measured outcome beside it. A failing precondition is a finding, not a bug: unlike a sanity check it
never makes the run an error, and like a sanity check it never counts toward the verdict. A declaration that
expects a precondition not to pass in a mode must expect its gated checks inconclusive in that mode.

Held-out confirmation. An expectation changed after seeing a run (its mode, aggregation or side of the bar) must be
confirmed on seeds that played no part in choosing it: ``confirmed_on`` lists them for the quick expectation.

Verdicts are decided by claim checks only: *reproduced* when every claim check passes, *not-reproduced* when
none passes (*inconclusive* when none passes and none fails), *partial* otherwise.
"""

from __future__ import annotations

import hashlib
import math
import operator
import re
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

MODES = ("quick", "full")
KINDS = ("claim", "sanity", "precondition")
OUTCOMES = ("pass", "fail", "inconclusive")
VERDICTS = ("reproduced", "partial", "not-reproduced", "inconclusive")
OPS: dict[str, Callable[[float, Any], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    ">": operator.gt,
    "<": operator.lt,
    "==": operator.eq,
    "in": lambda x, bounds: bounds[0] <= x <= bounds[1],
}
_ID = re.compile(r"^[a-z][a-z0-9_]*$")
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_.]*)(?::([^{}]*))?\}")
# literal measurements are not allowed in reasons: decimals (0.52, 1e-3) and percentages (15%)
_LITERAL_NUMBER = re.compile(r"(?<![\w.])(\d+\.\d+|\d+(\.\d+)?e-?\d+|\d+(\.\d+)?\s?%)")


class ClaimsError(ValueError):
    """A claims declaration is malformed, or a run disagrees with it."""


@dataclass(frozen=True)
class CheckSpec:
    """One declared check of a paper."""

    id: str
    measures: str
    kind: str
    op: str
    threshold: float | tuple[float, float]
    modes: tuple[str, ...]
    expect: Mapping[str, str]
    reason: str = ""
    explained_by: tuple[str, ...] = ()
    gates: tuple[str, ...] = ()  # precondition only: the claim checks it gates
    confirmed_on: tuple[int, ...] = ()  # held-out seeds on which the quick expectation was confirmed

    def passes(self, value: float) -> bool:
        """Whether one measured value satisfies ``value op threshold`` (NaN never does)."""
        if value is None or math.isnan(value):
            return False
        if self.op == "==" and math.isinf(value):
            return False
        return bool(OPS[self.op](value, self.threshold))

    def outcome(self, values: Sequence[float]) -> str:
        """pass / fail / inconclusive for one value or a per-seed sequence (see the module docstring)."""
        if any(math.isnan(v) for v in values):  # nothing was measured for some value: no decision either way
            return "inconclusive"
        passed = [self.passes(v) for v in values]
        if all(passed):
            return "pass"
        if not any(passed):
            return "fail"
        return "inconclusive"

    def condition(self) -> str:
        """``>= 10``, or ``in [0.6, 1.4]``."""
        if self.op == "in":
            lo, hi = self.threshold  # type: ignore[misc]
            return f"in [{lo:g}, {hi:g}]"
        return f"{self.op} {self.threshold:g}"


@dataclass(frozen=True)
class Claims:
    """A paper's whole declaration."""

    checks: tuple[CheckSpec, ...]
    quick: str = ""
    deviations: tuple[str, ...] = ()
    summary: str = ""
    source: str = ""  # the file it was read from
    digest: str = ""  # sha256 of the file's bytes: a result records it, so a stale result can be told

    def get(self, check_id: str) -> CheckSpec:
        for c in self.checks:
            if c.id == check_id:
                return c
        known = ", ".join(c.id for c in self.checks)
        raise ClaimsError(
            f"check {check_id!r} is not declared in {self.source or 'the claims'} (declared: {known})"
        )

    def for_mode(self, mode: str) -> list[CheckSpec]:
        return [c for c in self.checks if mode in c.modes]

    def gated_by(self, check_id: str, mode: str) -> list[CheckSpec]:
        """The preconditions that gate ``check_id`` in ``mode``."""
        return [c for c in self.for_mode(mode) if c.kind == "precondition" and check_id in c.gates]

    def expected_verdict(self, mode: str) -> str | None:
        """The verdict the declaration predicts for ``mode`` (None when no claim check runs in it)."""
        outcomes = [c.expect[mode] for c in self.for_mode(mode) if c.kind == "claim"]
        return verdict_from(outcomes) if outcomes else None

    def note(self, mode: str = "quick") -> str:
        """The status note: every claim check expected not to pass in ``mode``, with its reason template."""
        parts = [
            f"{c.id} ({c.expect[mode]}): {c.reason or self._gate_reason(c.id, mode)}"
            for c in self.for_mode(mode)
            if c.kind == "claim" and c.expect[mode] != "pass"
        ]
        return " ".join(parts)

    def _gate_reason(self, check_id: str, mode: str) -> str:
        unmet = [p for p in self.gated_by(check_id, mode) if p.expect[mode] != "pass"]
        return "; ".join(f"precondition {p.id} unmet: {p.reason}" for p in unmet)


def verdict_from(outcomes: Sequence[str]) -> str:
    """Verdict from the outcomes of the claim checks."""
    if not outcomes:
        raise ClaimsError("a verdict needs at least one claim check")
    if all(o == "pass" for o in outcomes):
        return "reproduced"
    if not any(o == "pass" for o in outcomes):
        return "inconclusive" if all(o == "inconclusive" for o in outcomes) else "not-reproduced"
    return "partial"


def _threshold(raw: Any, op: str, where: str) -> float | tuple[float, float]:
    if op == "in":
        if not (isinstance(raw, list) and len(raw) == 2 and all(isinstance(v, (int, float)) for v in raw)):
            raise ClaimsError(f"{where}: op 'in' needs threshold = [lo, hi], got {raw!r}")
        lo, hi = float(raw[0]), float(raw[1])
        if lo > hi:
            raise ClaimsError(f"{where}: threshold [lo, hi] needs lo <= hi, got {raw!r}")
        return (lo, hi)
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise ClaimsError(f"{where}: threshold must be a number, got {raw!r}")
    return float(raw)


def _expect(raw: Any, modes: tuple[str, ...], where: str) -> dict[str, str]:
    if isinstance(raw, str):
        raw = {m: raw for m in modes}
    if not isinstance(raw, dict):
        raise ClaimsError(f"{where}: expect must be an outcome or a table of mode = outcome, got {raw!r}")
    if set(raw) != set(modes):
        raise ClaimsError(
            f"{where}: expect must name exactly the check's modes {list(modes)}, got {sorted(raw)}"
        )
    for mode, outcome in raw.items():
        if outcome not in OUTCOMES:
            raise ClaimsError(
                f"{where}: expected outcome for {mode} must be one of {OUTCOMES}, got {outcome!r}"
            )
    return dict(raw)


def parse_claims(data: Mapping[str, Any], source: str = "") -> Claims:
    """Validate a parsed declaration (the TOML's tables) and return :class:`Claims`."""
    known_top = {"quick", "deviations", "summary", "checks"}
    unknown = set(data) - known_top
    if unknown:
        raise ClaimsError(
            f"{source}: unknown top-level keys {sorted(unknown)} (allowed: {sorted(known_top)})"
        )
    raw_checks = data.get("checks")
    if not isinstance(raw_checks, list) or not raw_checks:
        raise ClaimsError(f"{source}: a declaration needs at least one [[checks]] table")
    checks: list[CheckSpec] = []
    allowed = {
        "id",
        "measures",
        "kind",
        "op",
        "threshold",
        "modes",
        "expect",
        "reason",
        "explained_by",
        "gates",
        "confirmed_on",
    }
    for i, raw in enumerate(raw_checks):
        where = f"{source}: checks[{i}]"
        extra = set(raw) - allowed
        if extra:
            raise ClaimsError(f"{where}: unknown keys {sorted(extra)} (allowed: {sorted(allowed)})")
        cid = raw.get("id")
        if not isinstance(cid, str) or not _ID.match(cid):
            raise ClaimsError(f"{where}: id must be lower_snake_case, got {cid!r}")
        where = f"{source}: check {cid!r}"
        if any(c.id == cid for c in checks):
            raise ClaimsError(f"{where} is declared twice")
        measures = raw.get("measures", "")
        if not isinstance(measures, str) or not measures.strip():
            raise ClaimsError(f"{where}: 'measures' must say in one sentence what the check measures")
        kind = raw.get("kind")
        if kind not in KINDS:
            raise ClaimsError(f"{where}: kind must be one of {KINDS}, got {kind!r}")
        op = raw.get("op")
        if op not in OPS:
            raise ClaimsError(f"{where}: op must be one of {sorted(OPS)}, got {op!r}")
        threshold = _threshold(raw.get("threshold"), op, where)
        modes = tuple(raw.get("modes", MODES))
        if not modes or any(m not in MODES for m in modes) or len(set(modes)) != len(modes):
            raise ClaimsError(f"{where}: modes must be a non-empty subset of {MODES}, got {list(modes)}")
        expect = _expect(raw.get("expect"), modes, where)
        reason = raw.get("reason", "")
        if not isinstance(reason, str):
            raise ClaimsError(f"{where}: reason must be a string")
        if kind == "sanity" and any(o != "pass" for o in expect.values()):
            raise ClaimsError(f"{where}: a sanity check holds by construction; its expected outcome is pass")
        if any(o != "pass" for o in expect.values()) and not reason.strip() and kind != "claim":
            raise ClaimsError(f"{where}: an expected {set(expect.values()) - {'pass'}} needs a reason")
        literal = _LITERAL_NUMBER.search(PLACEHOLDER.sub("", reason))
        if literal:
            raise ClaimsError(
                f"{where}: the reason states the number {literal.group(0)!r} literally; cite a recorded "
                "metric, param or check as {name} instead"
            )
        explained_by = raw.get("explained_by", [])
        if not isinstance(explained_by, list) or not all(isinstance(e, str) for e in explained_by):
            raise ClaimsError(f"{where}: explained_by must be a list of recorded names")
        if any(o == "fail" for o in expect.values()) and not explained_by:
            raise ClaimsError(f"{where}: an expected fail must name the recorded metric(s) that explain it")
        gates = raw.get("gates", [])
        if not isinstance(gates, list) or not all(isinstance(g, str) for g in gates):
            raise ClaimsError(f"{where}: gates must be a list of claim check ids")
        if kind == "precondition" and not gates:
            raise ClaimsError(f"{where}: a precondition must name the claim checks it gates")
        if kind != "precondition" and gates:
            raise ClaimsError(f"{where}: only a precondition gates other checks")
        confirmed_on = raw.get("confirmed_on", [])
        if not isinstance(confirmed_on, list) or not all(
            isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in confirmed_on
        ):
            raise ClaimsError(f"{where}: confirmed_on must be a list of non-negative integer seeds")
        checks.append(
            CheckSpec(
                id=cid,
                measures=measures.strip(),
                kind=kind,
                op=op,
                threshold=threshold,
                modes=modes,
                expect=expect,
                reason=reason.strip(),
                explained_by=tuple(explained_by),
                gates=tuple(gates),
                confirmed_on=tuple(confirmed_on),
            )
        )
    for key in ("quick", "summary"):
        if not isinstance(data.get(key, ""), str):
            raise ClaimsError(f"{source}: {key} must be a string")
    deviations = data.get("deviations", [])
    if not isinstance(deviations, list) or not all(isinstance(d, str) for d in deviations):
        raise ClaimsError(f"{source}: deviations must be a list of strings")
    if not any(c.kind == "claim" for c in checks):
        raise ClaimsError(f"{source}: at least one check must be a claim (sanity checks decide nothing)")
    _validate_gates(checks, source)
    return Claims(
        checks=tuple(checks),
        quick=data.get("quick", "").strip(),
        deviations=tuple(d.strip() for d in deviations),
        summary=data.get("summary", "").strip(),
        source=source,
    )


def _validate_gates(checks: Sequence[CheckSpec], source: str) -> None:
    """Each precondition gates declared claim checks in every mode they run, and its expectation agrees.

    A gated claim that runs in a mode where its precondition is not declared would be decided unguarded, and a
    precondition expected unmet leaves nothing to expect of its claims but *inconclusive*. A claim check without a
    reason of its own may expect anything but pass only when an unmet precondition says why.
    """
    by_id = {c.id: c for c in checks}
    for p in (c for c in checks if c.kind == "precondition"):
        where = f"{source}: precondition {p.id!r}"
        for gid in p.gates:
            gated = by_id.get(gid)
            if gated is None or gated.kind != "claim":
                raise ClaimsError(f"{where} gates {gid!r}, which is not a declared claim check")
            missing = [m for m in gated.modes if m not in p.modes]
            if missing:
                raise ClaimsError(f"{where} gates {gid!r} in {gated.modes} but is not declared in {missing}")
            for mode in gated.modes:
                if p.expect[mode] != "pass" and gated.expect[mode] != "inconclusive":
                    raise ClaimsError(
                        f"{where} is expected {p.expect[mode]} in {mode} mode, so the claim {gid!r} it gates "
                        f"can only be expected inconclusive there, not {gated.expect[mode]}"
                    )
    for c in (c for c in checks if c.kind == "claim" and not c.reason):
        for mode in c.modes:
            unmet = [
                p
                for p in checks
                if p.kind == "precondition"
                and c.id in p.gates
                and mode in p.modes
                and p.expect[mode] != "pass"
            ]
            if c.expect[mode] != "pass" and not (c.expect[mode] == "inconclusive" and unmet):
                raise ClaimsError(f"{source}: check {c.id!r}: an expected {c.expect[mode]} needs a reason")


def load_claims(path: str | Path) -> Claims:
    """Read and validate ``claims.toml``; raises :class:`ClaimsError` naming the file and the problem."""
    path = Path(path)
    raw = path.read_bytes()
    try:
        data = tomllib.loads(raw.decode())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise ClaimsError(f"{path}: not valid TOML ({err})") from None
    claims = parse_claims(data, source=str(path))
    return Claims(
        checks=claims.checks,
        quick=claims.quick,
        deviations=claims.deviations,
        summary=claims.summary,
        source=claims.source,
        digest=hashlib.sha256(raw).hexdigest(),
    )


@cache
def _cached(path: str, mtime_ns: int) -> Claims:
    return load_claims(path)


def claims_at(path: str | Path) -> Claims | None:
    """The declaration at ``path`` (cached on its modification time), or None when there is none."""
    path = Path(path)
    try:
        mtime = path.stat().st_mtime_ns
    except FileNotFoundError:
        return None
    return _cached(str(path), mtime)


def fill_reason(template: str, values: Mapping[str, Any]) -> str:
    """Fill ``{name}`` / ``{name:.3g}`` placeholders from recorded values; unknown names stay visible."""

    def one(match: re.Match[str]) -> str:
        name, spec = match.group(1), match.group(2)
        if name not in values or values[name] is None:
            return "{" + name + ": not recorded}"
        value = values[name]
        try:
            return format(value, spec if spec is not None else (".4g" if isinstance(value, float) else ""))
        except (TypeError, ValueError):
            return str(value)

    return PLACEHOLDER.sub(one, template)


def placeholders(template: str) -> list[str]:
    return [m.group(1) for m in PLACEHOLDER.finditer(template)]


@dataclass
class MeasuredCheck:
    """A declared check with what one run measured for it (stored in result.json)."""

    id: str
    kind: str
    op: str
    threshold: float | tuple[float, float]
    measured: float | None  # the value, or the median of the values
    outcome: str
    expected: str
    values: list[float | None] | None = None  # per seed / replicate, when a sequence was recorded
    interval: tuple[float, float] | None = None  # (min, max) of the values
    note: str = ""
    measures: str = ""
    measured_outcome: str = (
        ""  # the outcome of the value alone, before an unmet precondition made it inconclusive
    )
    gated_by: list[dict[str, Any]] | None = None  # the unmet preconditions (id, measured, condition, outcome)
