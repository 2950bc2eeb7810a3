"""Usage errors exit 2 before anything runs: no record is written and the latest pointer stays where it was."""

import subprocess
import sys

import pytest
from typer.testing import CliRunner

from neurips26.cli import app

SELFTEST = "neurips26.harness.selftest.experiment:run"
RUN = ["run", "maxsketch", "--experiment", SELFTEST]

BAD = {
    "a negative seed": (["--seed", "-1"], "--seed must be a non-negative integer"),
    "an empty seed list": (["--seeds", ""], "seeds must look like"),
    "quick and full": (["--quick", "--full"], "--quick or --full, not both"),
    "full and quick": (["--full", "--quick"], "--quick or --full, not both"),
    "a timeout in-process": (["--timeout", "5"], "--timeout needs --jobs > 1"),
    "a timeout with one job": (["--timeout", "5", "--jobs", "1"], "--timeout needs --jobs > 1"),
    "a timeout on Dask": (["--timeout", "5", "--jobs", "2", "--executor", "dask-local"], "--timeout needs"),
    "a zero timeout": (["--timeout", "0", "--jobs", "2"], "positive number of seconds"),
    "no jobs": (["--jobs", "0"], "jobs must be a positive integer"),
    "Dask without a scheduler": (["--executor", "dask"], "scheduler"),
}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """A results folder with one good quick run of the self-test under the maxsketch slug."""
    out = tmp_path_factory.mktemp("results")
    assert CliRunner().invoke(app, [*RUN, "--out", str(out)]).exit_code == 0
    return out


@pytest.mark.parametrize("name", list(BAD))
def test_a_usage_error_exits_2_and_writes_nothing(results, name):
    args, message = BAD[name]
    latest = results / "maxsketch" / "quick" / "latest"
    before = (latest.read_text(), sorted(p.name for p in results.rglob("*")))
    result = CliRunner().invoke(app, [*RUN, "--out", str(results), *args])
    assert result.exit_code == 2 and message in result.output, result.output
    assert (latest.read_text(), sorted(p.name for p in results.rglob("*"))) == before


def test_quick_and_full_each_still_choose_the_mode(tmp_path):
    runner = CliRunner()
    assert runner.invoke(app, [*RUN, "--full", "--out", str(tmp_path)]).exit_code == 0
    assert runner.invoke(app, [*RUN, "--quick", "--out", str(tmp_path)]).exit_code == 0
    assert (tmp_path / "maxsketch" / "full" / "latest").exists()
    assert (tmp_path / "maxsketch" / "quick" / "latest").exists()


def test_run_all_checks_its_options_before_any_experiment_is_imported(tmp_path):
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from neurips26.cli import app\n"
        f"result = CliRunner().invoke(app, ['run', '--all', '--jobs', '0', '--out', {str(tmp_path)!r}])\n"
        "print(result.exit_code, [m for m in sys.modules if m.endswith('.experiment')])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.split() == ["2", "[]"], done.stdout
