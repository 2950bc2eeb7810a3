"""Committed full-run evidence: every record agrees with its declaration, and a record of changed code is stale."""

import hashlib
import json
import warnings

import pytest

from neurips26 import papers
from neurips26.harness.evidence import (
    EVIDENCE,
    changed_sources,
    commit_evidence,
    evidence_state,
    record_path,
    source_hashes,
)
from neurips26.harness.records import SCHEMA_VERSION, write_json_atomic

SLUG = "srgw-graphon"


def _record(slug=SLUG, flip=None, **extra):
    claims = papers.get(slug).claims
    checks = [
        {
            "id": c.id,
            "kind": c.kind,
            "op": c.op,
            "threshold": c.threshold,
            "outcome": c.expect["full"] if c.id != flip else "other",
            "expected": c.expect["full"],
            "measured": 1.0,
        }
        for c in claims.for_mode("full")
    ]
    return {
        "schema_version": SCHEMA_VERSION,
        "slug": slug,
        "mode": "full",
        "seed": 0,
        "status": "ok",
        "verdict": claims.expected_verdict("full"),
        "checks": checks,
        "tables": [],
        "figures": [],
        "metrics": {},
        "params": {},
        "notes": [],
        "total_seconds": 1.0,
        "started_at": "2026-12-02T20:00:00+00:00",
        **extra,
    }


@pytest.fixture
def tree(tmp_path):
    src = tmp_path / "src"
    (src / "neurips26").mkdir(parents=True)
    (src / "neurips26" / "method.py").write_text("x = 1\n")
    sources = {"neurips26/method.py": hashlib.sha256(b"x = 1\n").hexdigest()}
    return tmp_path / "evidence", src, sources


def _write(root, record, slug=SLUG):
    write_json_atomic(record_path(slug, root), record)


def test_states(tree):
    root, src, sources = tree
    assert evidence_state(SLUG, root, src).state == "not run"
    _write(root, _record(sources=sources))
    ok = evidence_state(SLUG, root, src)
    assert ok.state == "ok" and ok.summary() == f"{ok.verdict}, 2026-12-02"
    first = papers.get(SLUG).claims.for_mode("full")[0].id
    _write(root, _record(sources=sources, flip=first))
    bad = evidence_state(SLUG, root, src)
    assert bad.state == "mismatch" and first in bad.surprises[0]
    (src / "neurips26" / "method.py").write_text("x = 2\n")
    stale = evidence_state(SLUG, root, src)
    assert stale.state == "stale" and stale.changed == ["neurips26/method.py"]
    assert stale.summary().startswith("stale (")
    _write(root, _record(sources={}))
    assert evidence_state(SLUG, root, src).state == "unreadable"
    _write(root, _record(sources=sources, mode="quick"))
    assert evidence_state(SLUG, root, src).state == "unreadable"
    record_path(SLUG, root).write_text("{not json")
    assert evidence_state(SLUG, root, src).state == "unreadable"


def test_a_missing_source_file_is_a_change(tree):
    _, src, _ = tree
    assert changed_sources({"sources": {"neurips26/gone.py": "0" * 64}}, src) == ["neurips26/gone.py"]


def test_source_hashes_name_the_papers_own_modules_and_not_the_harness():
    import neurips26.transport.srgw_graphon.estimator  # noqa: F401

    hashes = source_hashes(SLUG)
    assert any(p.startswith("neurips26/transport/srgw_graphon/") for p in hashes)
    assert not any(p.startswith("neurips26/harness/") or p.endswith("__init__.py") for p in hashes)
    assert not any(p.startswith("neurips26/transport/ssg_mil/") for p in source_hashes(SLUG))


def test_commit_copies_the_latest_full_run_with_its_figures(tmp_path):
    results = tmp_path / "results"
    run_dir = results / SLUG / "full" / "r1"
    record = _record(sources={"neurips26/x.py": "0"}, figures=[{"name": "f", "path": "f.png"}])
    write_json_atomic(run_dir / "result.json", record)
    (run_dir / "f.png").write_bytes(b"png")
    (results / SLUG / "full" / "latest").write_text("r1\n")
    dest = commit_evidence(SLUG, results, tmp_path / "evidence")
    assert json.loads((dest / "result.json").read_text())["slug"] == SLUG
    assert (dest / "f.png").read_bytes() == b"png" and (dest / "f.png").stat().st_mode & 0o777 == 0o644
    write_json_atomic(run_dir / "result.json", {**record, "status": "error"})
    with pytest.raises(ValueError, match="not evidence"):
        commit_evidence(SLUG, results, tmp_path / "evidence")
    with pytest.raises(FileNotFoundError, match="no full run"):
        commit_evidence("pmd-td", results, tmp_path / "evidence")


def test_every_committed_record_agrees_with_its_declaration():
    """The full-mode expectations are backed by the committed records; a stale one is flagged, not trusted."""
    committed = sorted(p.parent.name for p in EVIDENCE.glob("*/result.json"))
    unknown = sorted(set(committed) - set(papers.slugs()))
    assert not unknown, f"evidence for unknown papers: {unknown}"
    states = {slug: evidence_state(slug) for slug in committed}
    broken = {s: e.surprises or e.error for s, e in states.items() if e.state in ("mismatch", "unreadable")}
    assert not broken, f"committed full records that disagree with their declarations: {broken}"
    stale = {s: e.changed for s, e in states.items() if e.state == "stale"}
    if stale:
        warnings.warn(f"stale full records (their code changed; rerun with --full): {stale}", stacklevel=1)


def test_the_evidence_page_is_current():
    """evidence/README.md is generated from the records (`neurips26 readme`), like the README's table."""
    from neurips26.harness.evidence import evidence_markdown

    page = EVIDENCE / "README.md"
    assert page.exists() and page.read_text() == evidence_markdown(), "run `neurips26 readme`"


def test_the_evidence_page_lists_a_record_check_by_check(tree):
    from neurips26.harness.evidence import evidence_markdown

    root, src, sources = tree
    _write(root, _record(sources=sources))
    text = evidence_markdown(root)
    first = papers.get(SLUG).claims.for_mode("full")[0].id
    assert f"## `{SLUG}`" in text and f"| `{first}` |" in text


def test_evidence_command_usage():
    from typer.testing import CliRunner

    from neurips26.cli import app

    runner = CliRunner()
    assert runner.invoke(app, ["evidence", "--all"]).exit_code == 2  # --all only commits
    assert runner.invoke(app, ["evidence", "nope"]).exit_code == 2
    assert runner.invoke(app, ["evidence", "--commit"]).exit_code == 2
    listed = runner.invoke(app, ["evidence", SLUG])
    assert listed.exit_code == 0 and SLUG in listed.output
