"""The registry is whole and derived from the code; the CLI behaves and fails well."""

import importlib
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from neurips26 import __version__, papers
from neurips26.cli import app

REPO = Path(__file__).resolve().parents[1]
SHARED_INDEX = REPO.parent / "shared" / "papers" / "README.md"
SELFTEST = "neurips26.harness.selftest.experiment:run"


def test_registry_has_38_unique_records_and_no_typed_state():
    assert len(papers.PAPERS) == 38
    assert len(set(papers.slugs())) == 38
    source = (REPO / "src" / "neurips26" / "papers.py").read_text()
    assert "status=" not in source and "api=" not in source and "status_note=" not in source
    for p in papers.PAPERS:
        assert p.status in papers.STATUSES, p.slug
        assert p.tier[0] in papers.TIERS, p.slug
        if p.status in ("partial", "not-reproduced", "inconclusive"):
            assert p.status_note, f"{p.slug}: a non-reproduced status needs a declared reason"


@pytest.mark.skipif(not SHARED_INDEX.exists(), reason="shared/papers index not beside the checkout")
def test_registry_matches_the_digest_index():
    rows = [
        line for line in SHARED_INDEX.read_text().splitlines() if line.startswith("| ") and "---" not in line
    ]
    index = {}
    for line in rows[1:]:
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        seed_file, number = cells[2].split(", ")
        index[cells[0]] = (seed_file, int(number))
    assert {p.slug: (p.seed_file, p.abstract) for p in papers.PAPERS} == index


def test_built_papers_export_their_api_from_the_field_package():
    for p in papers.PAPERS:
        if p.status == "planned":
            continue
        field = importlib.import_module(f"neurips26.{p.field}")
        assert p.api, f"{p.slug}: neurips26.{p.field} exports nothing from {p.module}"
        for name in p.api:
            assert getattr(field, name) is not None, f"from neurips26.{p.field} import {name}"
        if p.has_experiment:
            assert importlib.util.find_spec(p.experiment.split(":")[0]) is not None, p.slug


def test_show_prints_every_declared_check_fast_and_without_torch():
    built = [p for p in papers.PAPERS if p.claims is not None]
    code = (
        "import sys, time; t = time.perf_counter()\n"
        "from typer.testing import CliRunner\nfrom neurips26.cli import app\n"
        f"outs = [CliRunner().invoke(app, ['show', s]).output for s in {[p.slug for p in built]!r}]\n"
        "print(time.perf_counter() - t, 'torch' in sys.modules)\n"
        "import json; print(json.dumps(outs))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    first, second = done.stdout.splitlines()[:2]
    seconds, torch_loaded = first.split()
    assert torch_loaded == "False"
    assert float(seconds) < 1.0 * max(1, len(built))  # each show is well under a second
    for p, out in zip(built, json.loads(second)):
        for c in p.claims.checks:
            assert c.id in out and c.kind in out, (p.slug, c.id)


def test_cli_list_show_and_version(tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["list", "--out", str(tmp_path)])
    assert result.exit_code == 0
    assert all(slug in result.output for slug in papers.slugs())
    result = runner.invoke(app, ["show", "minibatch-kernel-kmeans"])
    assert result.exit_code == 0 and "Declared checks" in result.output and "expected" in result.output
    assert runner.invoke(app, ["show", "nope"]).exit_code == 2
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and __version__ in result.output


def test_list_and_report_survive_a_truncated_result(tmp_path):
    runner = CliRunner()
    assert (
        runner.invoke(app, ["run", "maxsketch", "--experiment", SELFTEST, "--out", str(tmp_path)]).exit_code
        == 0
    )
    latest = (tmp_path / "maxsketch" / "quick" / "latest").read_text().strip()
    path = tmp_path / "maxsketch" / "quick" / latest / "result.json"
    path.write_text(path.read_text()[:50])
    result = runner.invoke(app, ["list", "--out", str(tmp_path)])
    assert result.exit_code == 0 and "unreadable" in result.output
    assert runner.invoke(app, ["report", "--out", str(tmp_path)]).exit_code == 0
    assert "unreadable" in (tmp_path / "REPORT.md").read_text()
    assert runner.invoke(app, ["show", "maxsketch", "--out", str(tmp_path)]).exit_code == 0


def test_cli_run_usage_errors(tmp_path):
    runner = CliRunner()
    assert runner.invoke(app, ["run", "nope", "--out", str(tmp_path)]).exit_code == 2
    assert runner.invoke(app, ["run", "--out", str(tmp_path)]).exit_code == 2
    assert runner.invoke(app, ["run", "maxsketch", "--all", "--out", str(tmp_path)]).exit_code == 2
    assert runner.invoke(app, ["run", "maxsketch", "--seed", "1", "--seeds", "0-2"]).exit_code == 2
    planned = [p.slug for p in papers.PAPERS if p.status == "planned"]
    if planned:
        assert runner.invoke(app, ["run", planned[0], "--out", str(tmp_path)]).exit_code == 1


def test_out_is_checked_before_anything_runs(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    result = CliRunner().invoke(
        app, ["run", "maxsketch", "--experiment", SELFTEST, "--out", str(blocker / "sub")]
    )
    assert result.exit_code == 2 and "not a writable folder" in result.output
    assert not list(tmp_path.glob("**/result.json"))


def test_json_output_is_one_clean_document(tmp_path):
    runner = CliRunner()
    args = ["run", "maxsketch", "--experiment", SELFTEST, "--out", str(tmp_path), "--json"]
    one = runner.invoke(app, args)
    assert one.exit_code == 0
    payload = json.loads(one.stdout)
    assert [r["slug"] for r in payload["results"]] == ["maxsketch"] and payload["sweeps"] == []
    sweep = runner.invoke(app, [*args, "--seeds", "0-2"])
    assert sweep.exit_code == 0
    payload = json.loads(sweep.stdout)
    assert len(payload["results"]) == 3 and payload["sweeps"][0]["seeds"] == [0, 1, 2]


def test_a_crash_exits_1_and_strict_flags_a_surprise(tmp_path, make_experiment):
    runner = CliRunner()
    crash = make_experiment("def run(run):\n    raise RuntimeError('kaboom')\n")
    result = runner.invoke(app, ["run", "maxsketch", "--experiment", crash, "--out", str(tmp_path)])
    assert result.exit_code == 1 and "kaboom" in result.output
    surprising = make_experiment("def run(run):\n    run.check('score', 1000.0)\n")
    args = ["run", "maxsketch", "--experiment", surprising, "--out", str(tmp_path)]
    assert runner.invoke(app, args).exit_code == 0  # an honest failure is not an error
    strict = runner.invoke(app, [*args, "--strict"])
    assert strict.exit_code == 1 and "surprise" in strict.output


def test_cli_report(tmp_path):
    result = CliRunner().invoke(app, ["report", "--out", str(tmp_path)])
    assert result.exit_code == 0
    assert (tmp_path / "REPORT.md").exists() and (tmp_path / "report.html").exists()
    assert "38 papers" in (tmp_path / "REPORT.md").read_text()


def test_bench_records_rows_and_reports_unknown_slugs(tmp_path, monkeypatch):
    runner = CliRunner()
    assert runner.invoke(app, ["bench", "nope", "--out", str(tmp_path)]).exit_code == 2
    slug = next(p for p in papers.PAPERS if p.benchmark)
    module = importlib.import_module(slug.benchmark.split(":")[0])
    monkeypatch.setattr(module, "main", lambda quick=True: [{"case": "tiny", "time ratio": 2.0}])
    result = runner.invoke(app, ["bench", slug.slug, "--out", str(tmp_path)])
    assert result.exit_code == 0
    record = json.loads((tmp_path / slug.slug / "bench.json").read_text())
    assert record["rows"] == [{"case": "tiny", "time ratio": 2.0}] and record["mode"] == "quick"


def test_make_demo_writes_the_report_even_when_an_experiment_crashed(tmp_path):
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "neurips26").write_text(
        '#!/bin/sh\nif [ "$1" = run ]; then exit 1; fi\ntouch "$(dirname "$0")/report-written"\n'
    )
    (fake / "neurips26").chmod(0o755)
    stamp = tmp_path / "stamp"
    stamp.write_text("")
    env = {**os.environ, "MAKEFLAGS": ""}
    done = subprocess.run(
        ["make", "-s", "-C", str(REPO), "demo", f"BIN={fake}", f"STAMP={stamp}"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode != 0
    assert (fake / "report-written").exists()


def test_every_benchmark_module_imports_and_has_main():
    for p in papers.PAPERS:
        if p.benchmark:
            spec = importlib.util.find_spec(p.benchmark.split(":")[0])
            assert spec is not None, p.slug
            assert "def main(" in Path(spec.origin).read_text(), p.slug


def test_readme_table_is_generated_from_the_registry():
    from neurips26.cli import README_END, README_START

    readme = (REPO / "README.md").read_text()
    table = readme.split(README_START, 1)[1].split(README_END, 1)[0].strip()
    assert table == papers.markdown_table(), "README table is stale: run `neurips26 readme`"


def test_list_starts_fast():
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "neurips26", "list"], capture_output=True, check=True, timeout=60)
    assert time.perf_counter() - t0 < 5.0
