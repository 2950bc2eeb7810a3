"""Committed full-run evidence: the record behind each paper's full-mode expectations.

A full-mode expectation is evidence, not a prediction: ``neurips26 run SLUG --full`` with the final code, then
``neurips26 evidence SLUG`` copies that run's record and figures to ``evidence/<slug>/`` in the repository, where
they are committed. Each run record lists the source files of the library it executed (``sources``: path ->
sha256 of the file), so a record whose code has changed since is *stale* however recent its date.

States of a paper's evidence (:func:`evidence_state`):

- ``not run``: no committed record (or a wheel install, which ships none);
- ``unreadable``: a record that cannot be read (the reason is given);
- ``stale``: the code it ran has changed since (the changed files are listed);
- ``mismatch``: the code is unchanged but the record's outcomes differ from the current declaration;
- ``ok``: the record's outcomes are the declaration's full-mode expectations, check by check.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import papers
from .records import BROKEN, load_result, read_record

SRC = papers._ROOT.parent  # src/: source paths are recorded relative to it
REPO = SRC.parent
EVIDENCE = REPO / "evidence"
# the harness, the CLI and the registry decide nothing an experiment measures; re-exports neither
_NOT_SOURCES = (
    "neurips26.harness",
    "neurips26.cli",
    "neurips26.papers",
    "neurips26._lazy",
    "neurips26.__main__",
)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def source_hashes(slug: str | None = None) -> dict[str, str]:
    """sha256 of every library module this process has imported that can change what ``slug`` measures.

    Package ``__init__`` files (re-exports), the harness and other papers' packages are left out; shared modules
    (the LM stack, vision modules, data generators) are kept, so a change to them makes the record stale too.
    """
    own = papers.get(slug).module if slug and slug in papers.slugs() else None
    others = tuple(p.module for p in map(papers.get, papers.slugs()) if p.module != own)
    out: dict[str, str] = {}
    for name, module in list(sys.modules.items()):
        if not name.startswith("neurips26.") or name.startswith(_NOT_SOURCES) or name.startswith(others):
            continue
        file = getattr(module, "__file__", None)
        if not file or Path(file).name == "__init__.py":
            continue
        path = Path(file).resolve()
        try:
            out[path.relative_to(SRC).as_posix()] = _sha(path)
        except (ValueError, OSError):
            continue
    return dict(sorted(out.items()))


def changed_sources(record: dict[str, Any], src: Path = SRC) -> list[str]:
    """The recorded source files whose content differs now (or that are gone)."""
    changed = []
    for rel, digest in (record.get("sources") or {}).items():
        path = src / rel
        if not path.is_file() or _sha(path) != digest:
            changed.append(rel)
    return changed


@dataclass
class Evidence:
    slug: str
    state: str  # not run | unreadable | stale | mismatch | ok
    record: dict[str, Any] | None = None
    changed: list[str] = field(default_factory=list)  # stale: the files that changed
    surprises: list[str] = field(
        default_factory=list
    )  # mismatch: checks whose outcome is not the declared one
    error: str = ""

    @property
    def date(self) -> str:
        return (self.record or {}).get("started_at", "")[:10]

    @property
    def verdict(self) -> str | None:
        return (self.record or {}).get("verdict")

    def summary(self) -> str:
        """One cell: ``partial, 2026-12-02``; ``stale (partial, 2026-12-02)``; ``not run``."""
        if self.state == "ok":
            return f"{self.verdict}, {self.date}"
        if self.state in ("stale", "mismatch"):
            return f"{self.state} ({self.verdict}, {self.date})"
        return self.state


def record_path(slug: str, root: Path = EVIDENCE) -> Path:
    return root / slug / "result.json"


def surprises(record: dict[str, Any], slug: str) -> list[str]:
    """Every way the record's outcomes differ from the current declaration's full-mode expectations."""
    claims = papers.get(slug).claims
    if claims is None:
        return ["the paper has no claims declaration"]
    if record.get("status") != "ok":
        return [f"the run is an error: {(record.get('error') or '').strip().splitlines()[-1:]}"]
    measured = {c.get("id"): c for c in record.get("checks", []) if isinstance(c, dict)}
    out = []
    for spec in claims.for_mode("full"):
        c = measured.get(spec.id)
        if c is None:
            out.append(f"{spec.id}: declared for full mode, not in the record")
        elif c.get("outcome") != spec.expect["full"]:
            out.append(
                f"{spec.id}: declared {spec.expect['full']}, measured {c.get('outcome')} ({c.get('measured')})"
            )
    extra = set(measured) - {s.id for s in claims.for_mode("full")}
    out += [f"{cid}: in the record, no longer declared for full mode" for cid in sorted(extra)]
    return out


def evidence_state(slug: str, root: Path = EVIDENCE, src: Path = SRC) -> Evidence:
    path = record_path(slug, root)
    if not path.exists():
        return Evidence(slug, "not run")
    record = read_record(path, slug, "full")
    if record.get("status") in BROKEN:
        return Evidence(slug, "unreadable", record, error=record.get("error", ""))
    if record.get("mode") != "full":
        return Evidence(slug, "unreadable", record, error=f"a {record.get('mode')!r} record, not a full run")
    if not record.get("sources"):
        return Evidence(
            slug, "unreadable", record, error="the record lists no sources, so it cannot be dated"
        )
    changed = changed_sources(record, src)
    if changed:
        return Evidence(slug, "stale", record, changed=changed)
    found = surprises(record, slug)
    return Evidence(slug, "mismatch" if found else "ok", record, surprises=found)


def commit_evidence(slug: str, out_dir: str | Path = "results", root: Path = EVIDENCE) -> Path:
    """Copy the latest full run of ``slug`` under ``out_dir`` (record and figures) to ``root/<slug>/``."""
    record = load_result(slug, out_dir, "full")
    if record is None:
        raise FileNotFoundError(
            f"{slug}: no full run under {out_dir}; run `neurips26 run {slug} --full` first"
        )
    if record.get("status") != "ok":
        raise ValueError(
            f"{slug}: the latest full run is {record.get('status')!r}, not evidence ({record.get('path')})"
        )
    if not record.get("sources"):
        raise ValueError(f"{slug}: the latest full run lists no sources (made by an older harness); rerun it")
    run_dir = Path(record["path"]).parent
    dest = root / slug
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for f in [Path("result.json")] + [Path(fig["path"]) for fig in record.get("figures", [])]:
        target = dest / f
        shutil.copyfile(run_dir / f, target)
        target.chmod(0o644)
    return dest


def _value(check: dict[str, Any]) -> str:
    from .run import fmt_number

    text = fmt_number(check.get("measured"))
    if check.get("interval"):
        lo, hi = check["interval"]
        text += f" [{fmt_number(lo)}, {fmt_number(hi)}]"
    return text


def evidence_markdown(root: Path = EVIDENCE) -> str:
    """``evidence/README.md``: every paper's committed full run, check by check (``neurips26 readme`` writes it)."""
    md = [
        "# Full-run evidence",
        "",
        "Generated by `neurips26 readme` from the records in this folder; do not edit. Each `<slug>/result.json`",
        "is the record of `neurips26 run SLUG --full` (its figures beside it), committed with `neurips26 evidence",
        "--commit SLUG`. A record is *stale* once the code it ran has changed, and *mismatch* when its outcomes",
        "differ from the current declaration. Per-seed checks show the median and the [min, max] over seeds.",
        "",
    ]
    states = [evidence_state(slug, root) for slug in papers.slugs()]
    md += ["| paper | state | verdict | date | run time |", "| --- | --- | --- | --- | --- |"]
    for ev in states:
        seconds = (ev.record or {}).get("total_seconds")
        took = f"{seconds / 60:.1f} min" if isinstance(seconds, (int, float)) else "-"
        md.append(f"| `{ev.slug}` | {ev.state} | {ev.verdict or '-'} | {ev.date or '-'} | {took} |")
    md.append("")
    for ev in states:
        if ev.record is None or ev.state == "unreadable":
            continue
        rec = ev.record
        commit = ((rec.get("environment") or {}).get("git") or {}).get("commit") or "unknown"
        md += [f"## `{ev.slug}`: {ev.state}, {ev.verdict}", ""]
        md += [f"Seed {rec.get('seed')}, started {rec.get('started_at')}, commit `{commit[:10]}`.", ""]
        if ev.changed:
            md += ["Changed since: " + ", ".join(f"`{c}`" for c in ev.changed), ""]
        md += [
            "| check | kind | condition | declared | measured | outcome |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        claims = papers.get(ev.slug).claims
        for c in rec.get("checks", []):
            try:
                spec = claims.get(c["id"]) if claims else None
            except ValueError:
                spec = None
            declared = spec.expect.get("full", "-") if spec else "not declared"
            condition = spec.condition() if spec else "-"
            outcome = c.get("outcome", "-")
            if c.get("gated_by"):
                outcome += " (precondition unmet: " + ", ".join(g["id"] for g in c["gated_by"]) + ")"
            md.append(
                f"| `{c['id']}` | {c.get('kind')} | {condition.replace('|', '/')} | {declared} | {_value(c)} | {outcome} |"
            )
        md.append("")
        for fig in rec.get("figures", []):
            md += [f"![{fig['name']}]({ev.slug}/{fig['path']})", ""]
    return "\n".join(md).rstrip() + "\n"
