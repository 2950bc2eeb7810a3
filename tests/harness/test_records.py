"""Run records: files are world-readable; provenance is honest; an infinite metric stays a measurement."""

import json
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from neurips26.harness import run_experiment
from neurips26.harness.environment import code_state
from neurips26.harness.report import write_report

SELFTEST = "neurips26.harness.selftest.experiment:run"
SLUG = "maxsketch"


def _stored(tmp_path, slug=SLUG) -> Path:
    result = run_experiment(slug, out_dir=tmp_path, experiment=SELFTEST)
    return tmp_path / slug / "quick" / result["run_id"] / "result.json"


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
