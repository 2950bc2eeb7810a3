"""Run records on disk: one folder per run, written atomically, with a "latest" pointer per mode.

Layout under the results folder::

    <slug>/<mode>/<run-id>/result.json      one run: the record and its figures (PNG) side by side
    <slug>/<mode>/latest                    text: the run-id of the newest complete run (written last)
    <slug>/<mode>/sweeps/<sweep-id>/seed-<s>/result.json, summary.json
    <slug>/<mode>/latest-sweep              text: the sweep-id of the newest sweep
    <slug>/bench.json                       rows written by ``neurips26 bench``

A record is written to a temporary file and renamed into place, and the pointer is moved only after the
record is complete, so an interrupted run never leaves a half-written result behind the pointer. Files are
world-readable like any other file the user writes (0644 under the usual umask), so that a report can be served
or read by another user. Readers never raise on a damaged, old-schema or incomplete file: they return a record
whose ``status`` says so, and the caller carries on.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import tempfile
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 2
KEEP_RUNS = 5  # complete runs kept per (paper, mode); older run folders are removed
BROKEN = ("unreadable", "stale-schema")


@lru_cache(maxsize=1)
def _file_mode() -> int:
    """The mode ``open()`` would give a new file (0o666 less the umask); mkstemp's 0600 would survive the rename."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o644  # no /proc (macOS): the usual umask 022; os.umask() cannot be read without setting it


def write_text_atomic(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file in the same folder and an atomic rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, _file_mode())
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_json_atomic(path: Path, obj: Any) -> Path:
    return write_text_atomic(path, json.dumps(obj, indent=2, allow_nan=False) + "\n")


def new_run_id(seed: int) -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    return f"{stamp}Z-seed{seed}-{secrets.token_hex(3)}"


def mode_dir(out_dir: str | Path, slug: str, mode: str) -> Path:
    return Path(out_dir) / slug / mode


def new_run_dir(out_dir: str | Path, slug: str, mode: str, seed: int, run_id: str | None = None) -> Path:
    path = mode_dir(out_dir, slug, mode) / (run_id or new_run_id(seed))
    path.mkdir(parents=True, exist_ok=False)
    return path


def commit_run(out_dir: str | Path, slug: str, mode: str, run_dir: Path, keep: int = KEEP_RUNS) -> None:
    """Point ``latest`` at ``run_dir`` (after its record is written) and prune older complete runs."""
    base = mode_dir(out_dir, slug, mode)
    write_text_atomic(base / "latest", run_dir.name + "\n")
    runs = sorted(
        p for p in base.iterdir() if p.is_dir() and p.name != "sweeps" and (p / "result.json").exists()
    )
    for old in runs[:-keep] if keep > 0 else []:
        if old.name != run_dir.name:
            shutil.rmtree(old, ignore_errors=True)


def _pointer(path: Path) -> str | None:
    try:
        name = path.read_text().strip()
    except (FileNotFoundError, NotADirectoryError, UnicodeDecodeError, OSError):
        return None
    return name if name and "/" not in name and name not in (".", "..") else None


def discard_unfinished(run_dir: Path) -> None:
    """Remove a run folder that holds no record (its task was interrupted or killed before writing one)."""
    if run_dir.is_dir() and not (run_dir / "result.json").exists():
        shutil.rmtree(run_dir, ignore_errors=True)


_NUMBER = (int, float)
_VALUE = (int, float, str, type(None))  # a measured value: a number, "inf"/"nan", or null
# What readers (report, list, show, sweeps) index without a guard: key -> (types, required). A record that
# parses and has the current schema but breaks one of these is reported as unreadable instead of crashing them.
_RECORD = {
    "slug": (str, True),
    "mode": (str, True),
    "seed": (int, True),
    "status": (str, True),
    "verdict": ((str, type(None)), True),
    "checks": (list, True),
    "tables": (list, True),
    "figures": (list, True),
    "metrics": (dict, True),
    "params": (dict, True),
    "notes": (list, True),
    "total_seconds": (_NUMBER, True),
    "started_at": (str, True),
    "run_id": (str, False),
    "title": (str, False),
    "tier": (str, False),
    "timings": (dict, False),
    "expected_verdict": ((str, type(None)), False),
    "claims": ((dict, type(None)), False),
    "environment": (dict, False),
    "error": (str, False),
    "sources": ((dict, type(None)), False),
}
_CHECK = {
    "id": (str, True),
    "kind": (str, True),
    "op": (str, True),
    "threshold": ((*_NUMBER, list), True),
    "measured": (_VALUE, True),
    "outcome": (str, True),
    "expected": (str, True),
    "values": ((list, type(None)), False),
    "interval": ((list, type(None)), False),
    "measured_outcome": (str, False),
    "gated_by": ((list, type(None)), False),
}
_TABLE = {"name": (str, True), "columns": (list, True), "rows": (list, True), "caption": (str, False)}
_FIGURE = {"name": (str, True), "path": (str, True), "caption": (str, False)}
_SWEEP = {
    "seeds": (list, True),
    "crashed": (list, True),
    "n_crashed": (int, True),
    "verdicts": (dict, True),
    "checks": (list, True),
}
_SWEEP_CHECK = {
    "id": (str, True),
    "kind": (str, True),
    "expected": (str, True),
    "outcomes": (dict, True),
    "median": (_VALUE, True),
    "min": (_VALUE, True),
    "max": (_VALUE, True),
    "consistent": (bool, True),
}


def _bad_fields(obj: Any, fields: dict[str, tuple[Any, bool]], where: str) -> str | None:
    if not isinstance(obj, dict):
        return f"{where} is not an object"
    for key, (types, required) in fields.items():
        if key not in obj:
            if required:
                return f"{where} lacks {key!r}"
        elif not isinstance(obj[key], types) or (types is int and isinstance(obj[key], bool)):
            return f"{where}: {key!r} is {type(obj[key]).__name__}"
    return None


def record_problem(data: dict[str, Any]) -> str | None:
    """Why a current-schema record cannot be shown (a missing or mistyped field), or None when it can."""
    problem = _bad_fields(data, _RECORD, "the record")
    if problem:
        return problem
    if data["status"] not in ("ok", "error"):
        return f"the record: status {data['status']!r}"
    if data["status"] == "error" and not isinstance(data.get("error"), str):
        return "the record: an error without its message"
    for i, check in enumerate(data["checks"]):
        problem = _bad_fields(check, _CHECK, f"check {i}")
        if problem:
            return problem
        threshold = check["threshold"]
        if isinstance(threshold, list) and not (
            len(threshold) == 2 and all(isinstance(t, _NUMBER) for t in threshold)
        ):
            return f"check {check['id']!r}: threshold {threshold!r}"
    for i, table in enumerate(data["tables"]):
        problem = _bad_fields(table, _TABLE, f"table {i}")
        if problem:
            return problem
        if not all(isinstance(c, str) for c in table["columns"]) or not all(
            isinstance(r, dict) for r in table["rows"]
        ):
            return f"table {table['name']!r}: columns must be names and rows objects"
    for i, figure in enumerate(data["figures"]):
        problem = _bad_fields(figure, _FIGURE, f"figure {i}")
        if problem:
            return problem
    env = data.get("environment", {})
    for key in ("git", "threads", "packages"):
        if not isinstance(env.get(key, {}), (dict, type(None))):
            return f"the record: environment {key!r} is {type(env[key]).__name__}"
    return None


def read_record(path: Path, slug: str = "", mode: str = "") -> dict[str, Any]:
    """One result.json; a damaged, old-schema or incomplete file gives a record with ``status`` unreadable or
    stale-schema, whose ``error`` names the problem (readers then index a record's fields without guards)."""
    try:
        data = json.loads(Path(path).read_text())
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
    except (OSError, UnicodeDecodeError, ValueError) as err:
        return {"slug": slug, "mode": mode, "status": "unreadable", "path": str(path), "error": str(err)}
    if data.get("schema_version") != SCHEMA_VERSION:
        return {
            "slug": data.get("slug", slug),
            "mode": data.get("mode", mode),
            "status": "stale-schema",
            "path": str(path),
            "error": f"schema_version {data.get('schema_version')!r}, this version reads {SCHEMA_VERSION}",
        }
    problem = record_problem(data)
    if problem:
        return {"slug": slug, "mode": mode, "status": "unreadable", "path": str(path), "error": problem}
    data["path"] = str(path)
    return data


def load_result(slug: str, out_dir: str | Path = "results", mode: str | None = None) -> dict[str, Any] | None:
    """The newest stored result of ``slug`` in ``mode`` (the newer of the two modes when None), or None."""
    if mode is None:
        found = [r for r in (load_result(slug, out_dir, m) for m in ("quick", "full")) if r is not None]
        return max(found, key=lambda r: r.get("started_at", "")) if found else None
    base = mode_dir(out_dir, slug, mode)
    run_id = _pointer(base / "latest")
    if run_id is None:
        if (base / "latest").exists():
            return {
                "slug": slug,
                "mode": mode,
                "status": "unreadable",
                "path": str(base / "latest"),
                "error": "the latest pointer is empty or damaged",
            }
        return None
    return read_record(base / run_id / "result.json", slug, mode)


def sweep_dir(out_dir: str | Path, slug: str, mode: str, sweep_id: str) -> Path:
    return mode_dir(out_dir, slug, mode) / "sweeps" / sweep_id


def load_sweep(slug: str, out_dir: str | Path, mode: str) -> dict[str, Any] | None:
    """The newest sweep summary of ``slug`` in ``mode``, or None (damaged files give an unreadable marker)."""
    base = mode_dir(out_dir, slug, mode)
    sweep_id = _pointer(base / "latest-sweep")
    if sweep_id is None:
        return None
    path = base / "sweeps" / sweep_id / "summary.json"
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION:
            raise ValueError("not a current sweep summary")
        problem = _bad_fields(data, _SWEEP, "the summary") or next(
            (p for i, c in enumerate(data["checks"]) if (p := _bad_fields(c, _SWEEP_CHECK, f"check {i}"))),
            None,
        )
        if problem:
            raise ValueError(problem)
    except (OSError, UnicodeDecodeError, ValueError) as err:
        return {"slug": slug, "mode": mode, "status": "unreadable", "path": str(path), "error": str(err)}
    return data


def load_bench(slug: str, out_dir: str | Path) -> dict[str, Any] | None:
    path = Path(out_dir) / slug / "bench.json"
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
            raise ValueError("not a bench record")
        if not all(isinstance(row, dict) for row in data["rows"]):
            raise ValueError("a bench row is not an object")
    except (OSError, UnicodeDecodeError, ValueError) as err:
        return {"status": "unreadable", "path": str(path), "error": str(err), "rows": []}
    return data
