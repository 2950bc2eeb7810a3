"""The registry is whole and honest; the CLI behaves."""

import importlib
import importlib.util
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from neurips26 import papers
from neurips26.cli import app

SHARED_INDEX = Path(__file__).resolve().parents[1].parent / "shared" / "papers" / "README.md"


def test_registry_has_38_unique_records():
    assert len(papers.PAPERS) == 38
    assert len(set(papers.slugs())) == 38
    for p in papers.PAPERS:
        assert p.status in papers.STATUSES, p.slug
        assert p.tier[0] in papers.TIERS, p.slug
        assert p.module == f"neurips26.{p.field}.{p.slug.replace('-', '_')}"
        if p.status in ("partial", "not-reproduced"):
            assert p.status_note, f"{p.slug}: a non-reproduced status needs a note saying why"


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


def test_built_papers_are_importable():
    for p in papers.PAPERS:
        if p.status == "planned":
            continue
        module = importlib.import_module(p.module)
        for name in p.api:
            assert hasattr(module, name), f"{p.slug}: {p.module} lacks {name}"
        if p.has_experiment:
            assert importlib.util.find_spec(p.experiment.split(":")[0]) is not None, p.slug


def test_field_packages_export_what_they_list():
    for field in sorted({p.field for p in papers.PAPERS if p.status != "planned"}):
        package = importlib.import_module(f"neurips26.{field}")
        for name in getattr(package, "__all__", []):
            assert getattr(package, name) is not None, f"neurips26.{field}.{name}"


def test_cli_list_and_show():
    runner = CliRunner()
    result = runner.invoke(app, ["list"])
    assert result.exit_code == 0
    assert all(slug in result.output for slug in papers.slugs())
    result = runner.invoke(app, ["show", "minibatch-kernel-kmeans"])
    assert result.exit_code == 0 and "Reproduction check" in result.output
    assert runner.invoke(app, ["show", "nope"]).exit_code == 2


def test_cli_run_errors(tmp_path):
    runner = CliRunner()
    assert runner.invoke(app, ["run", "nope", "--out", str(tmp_path)]).exit_code == 2
    assert runner.invoke(app, ["run", "--out", str(tmp_path)]).exit_code == 2
    planned = [p.slug for p in papers.PAPERS if p.status == "planned"]
    if planned:
        assert runner.invoke(app, ["run", planned[0], "--out", str(tmp_path)]).exit_code == 1


def test_cli_report(tmp_path):
    result = CliRunner().invoke(app, ["report", "--out", str(tmp_path)])
    assert result.exit_code == 0
    assert (tmp_path / "REPORT.md").exists() and (tmp_path / "report.html").exists()
    assert re.search(r"38 papers", (tmp_path / "REPORT.md").read_text())


def test_readme_table_is_generated_from_the_registry():
    from neurips26.cli import README_END, README_START

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    table = readme.split(README_START, 1)[1].split(README_END, 1)[0].strip()
    assert table == papers.markdown_table(), "README table is stale: run `neurips26 readme`"
