"""Run records: an incomplete record is named, not a crash; files are world-readable; provenance is honest."""

import json
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from typer.testing import CliRunner

from neurips26 import papers
from neurips26.cli import app
from neurips26.harness import run_experiment
from neurips26.harness.environment import code_state
from neurips26.harness.executor import run_many
from neurips26.harness.records import load_result, load_sweep, write_json_atomic, write_text_atomic
from neurips26.harness.report import build_markdown, write_report

SELFTEST = "neurips26.harness.selftest.experiment:run"
SLUG = "maxsketch"


def _stored(tmp_path, slug=SLUG) -> Path:
    result = run_experiment(slug, out_dir=tmp_path, experiment=SELFTEST)
    return tmp_path / slug / "quick" / result["run_id"] / "result.json"


def _drop(key):
    return lambda r: r.pop(key)


def _set(key, value):
    return lambda r: r.__setitem__(key, value)


DAMAGE = {
    "no checks": (_drop("checks"), "lacks 'checks'"),
    "tables not a list": (_set("tables", "notalist"), "'tables' is str"),
    "a check without its outcome": (lambda r: r["checks"][0].pop("outcome"), "check 0 lacks 'outcome'"),
    "a text threshold": (lambda r: r["checks"][0].__setitem__("threshold", "big"), "'threshold' is str"),
    "a row that is not an object": (lambda r: r["tables"][0].__setitem__("rows", [1, 2]), "rows objects"),
    "a figure without its path": (_set("figures", [{"name": "f"}]), "figure 0 lacks 'path'"),
    "no seed": (_drop("seed"), "lacks 'seed'"),
    "an odd status": (_set("status", "done"), "status 'done'"),
    "environment not an object": (_set("environment", []), "'environment' is list"),
    "threads not an object": (lambda r: r["environment"].__setitem__("threads", 3), "'threads' is int"),
}


def test_incomplete_records_are_named_by_list_show_and_report(tmp_path):
    slugs = {name: p.slug for name, p in zip(DAMAGE, papers.PAPERS)}  # one damaged record per paper
    good = json.loads(_stored(tmp_path, "scratch").read_text())
    for name, (damage, _) in DAMAGE.items():
        record = json.loads(json.dumps({**good, "slug": slugs[name]}))
        damage(record)
        write_json_atomic(tmp_path / slugs[name] / "quick" / good["run_id"] / "result.json", record)
        write_text_atomic(tmp_path / slugs[name] / "quick" / "latest", good["run_id"])
    surprises = build_markdown(tmp_path).split("## Surprises", 1)[1].split("## Summary", 1)[0]
    runner = CliRunner()
    listed = runner.invoke(app, ["list", "--out", str(tmp_path)])
    assert listed.exit_code == 0
    for name, (_, problem) in DAMAGE.items():
        slug = slugs[name]
        loaded = load_result(slug, tmp_path, "quick")
        assert loaded["status"] == "unreadable" and problem in loaded["error"], (name, loaded)
        assert f"- `{slug}` (quick): record" in surprises and problem in surprises, name
        row = next(line for line in listed.output.splitlines() if f" {slug} " in line)
        assert "unreadable (quick)" in row, (name, row)
        assert runner.invoke(app, ["show", slug, "--out", str(tmp_path)]).exit_code == 0, name


def test_records_of_every_kind_pass_the_check(tmp_path, make_experiment, monkeypatch):
    assert load_result(SLUG, tmp_path, "quick") is None
    _stored(tmp_path)
    assert load_result(SLUG, tmp_path, "quick")["status"] == "ok"
    crash = make_experiment("def run(run):\n    raise RuntimeError('kaboom')\n")
    run_experiment(SLUG, out_dir=tmp_path, experiment=crash)
    assert load_result(SLUG, tmp_path, "quick")["status"] == "error"
    monkeypatch.setitem(sys.modules, "ripser", None)
    unresolved = make_experiment("import ripser\n\ndef run(run):\n    run.check('score', 1.0)\n")
    run_experiment(SLUG, out_dir=tmp_path, experiment=unresolved)  # fails before the experiment starts
    assert load_result(SLUG, tmp_path, "quick")["status"] == "error"
    killed = make_experiment("import os, signal\n\ndef run(run):\n    os.kill(os.getpid(), signal.SIGKILL)\n")
    run_many([SLUG], out_dir=tmp_path, jobs=2, experiment=killed)  # the pool writes the record
    assert "died" in load_result(SLUG, tmp_path, "quick")["error"]


def test_an_incomplete_sweep_summary_is_named(tmp_path):
    _, (summary,) = run_many([SLUG], seeds=[0, 1], out_dir=tmp_path, experiment=SELFTEST)
    assert load_sweep(SLUG, tmp_path, "quick") == summary
    path = tmp_path / SLUG / "quick" / "sweeps" / summary["sweep_id"] / "summary.json"
    del summary["checks"][0]["outcomes"]
    path.write_text(json.dumps(summary))
    assert load_sweep(SLUG, tmp_path, "quick")["status"] == "unreadable"
    assert f"`{SLUG}` (quick sweep): summary" in build_markdown(tmp_path)


def _umask() -> int:
    text = Path("/proc/self/status").read_text() if Path("/proc/self/status").exists() else "Umask: 0022"
    return int(re.search(r"Umask:\s*(\d+)", text).group(1), 8)


def test_records_and_reports_are_readable_by_others(tmp_path):
    path = _stored(tmp_path)
    md, html = write_report(tmp_path)
    umask = _umask()
    for file in (path, path.parent.parent / "latest", md, html, path.parent / "result.json"):
        assert file.stat().st_mode & 0o777 == 0o666 & ~umask, file
    for folder in (path.parent, path.parent.parent, tmp_path / SLUG):
        assert folder.stat().st_mode & 0o777 == 0o777 & ~umask, folder
    if umask == 0o022:
        assert path.stat().st_mode & 0o777 == 0o644 and path.parent.stat().st_mode & 0o777 == 0o755


def test_provenance_records_argv_version_and_untracked_files(tmp_path):
    env = json.loads(_stored(tmp_path).read_text())["environment"]
    assert env["argv"] == sys.argv
    assert env["git"]["version"] == metadata.version("neurips26")
    installed = code_state(None)  # a wheel install: no checkout to ask
    assert installed == {"version": metadata.version("neurips26"), "commit": None, "dirty": None}
    repo = tmp_path / "checkout"
    repo.mkdir()

    def git(*args):
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)

    git("init", "-q")
    (repo / "tracked.py").write_text("x = 1\n")
    git("add", "tracked.py")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    clean = code_state(repo)
    assert clean["dirty"] is False and len(clean["commit"]) == 40
    (repo / "experiment.py").write_text("def run(run): ...\n")  # a new paper not yet added to git
    assert code_state(repo)["dirty"] is True


def test_an_infinite_metric_is_kept(tmp_path, make_experiment):
    exp = make_experiment(
        """
        def run(run):
            run.metric("loss", float("inf"))
            run.metric("gain", -float("inf"))
            run.metric("undefined", float("nan"))
            run.check("score", 1.0)
        """
    )
    result = run_experiment("demo", out_dir=tmp_path, experiment=exp)
    stored = json.loads((tmp_path / "demo" / "quick" / result["run_id"] / "result.json").read_text())
    assert stored["metrics"] == {"loss": "inf", "gain": "-inf", "undefined": None}
