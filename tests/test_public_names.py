"""A paper's public names are written once, in its package's ``__all__``; everything else derives them.

``Paper.api``, the field package's lazy exports (``from neurips26.<field> import Name``), ``neurips26 show`` and the
README table all read that one list, statically (with ``ast``), so listing papers never imports torch.
"""

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from neurips26 import papers
from neurips26._lazy import PublicNamesError, attach, field_exports, public_names
from neurips26.cli import README_END, README_START, app

REPO = Path(__file__).resolve().parents[1]
BUILT = [p for p in papers.PAPERS if p.status != "planned"]
FIELDS = sorted({p.field for p in BUILT})


def _init(p: papers.Paper) -> Path:
    return p.package_dir / "__init__.py"


def _bound_names(path: Path) -> set[str]:
    """Public names an ``__init__.py`` binds at module level: its imports and assignments (``__all__`` aside),
    including the imports under ``if TYPE_CHECKING:`` that a module ``__getattr__`` loads lazily."""
    bound: set[str] = set()
    body = ast.parse(path.read_text()).body
    for node in list(body):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            body += node.body
    for node in body:
        if isinstance(node, ast.ImportFrom | ast.Import):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.Assign):
            bound |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            bound.add(node.name)
    return {n for n in bound if not n.startswith("_") and n not in ("annotations", "TYPE_CHECKING")}


@pytest.mark.parametrize("p", BUILT, ids=lambda p: p.slug)
def test_all_is_a_literal_list_matching_what_the_package_binds(p):
    names = public_names(_init(p))  # raises PublicNamesError when not a literal list of distinct strings
    assert names, f"{p.slug}: {_init(p)} has an empty __all__"
    bound = _bound_names(_init(p))
    assert set(names) - bound == set(), f"{p.slug}: in __all__ but never imported or defined in __init__"
    assert bound - set(names) == set(), f"{p.slug}: imported in __init__ but missing from __all__"


def test_paper_api_is_its_all():
    for p in BUILT:
        assert p.api == public_names(_init(p)), p.slug


@pytest.mark.parametrize("field", FIELDS)
def test_field_exports_every_public_name_of_every_paper_from_that_paper(field):
    pkg = importlib.import_module(f"neurips26.{field}")
    assert pkg._PROBLEMS == {}, f"neurips26.{field}: {pkg._PROBLEMS}"
    for p in (p for p in BUILT if p.field == field):
        sub = "." + p.module.rsplit(".", 1)[1]
        wrong = {name: pkg._EXPORTS.get(name) for name in p.api if pkg._EXPORTS.get(name) != sub}
        assert wrong == {}, f"{p.slug}: neurips26.{field} maps these names elsewhere (or nowhere)"
        assert set(p.api) <= set(pkg.__all__) and set(p.api) <= set(dir(pkg)), p.slug
    # nothing but the papers' and the declared shared modules' names: every export points at a real module
    for name, module in pkg._EXPORTS.items():
        target = REPO / "src" / "neurips26" / field / module.lstrip(".")
        assert (target / "__init__.py").is_file() or target.with_suffix(".py").is_file(), (name, module)


def test_importing_every_field_reads_no_paper_and_no_torch():
    code = (
        "import sys\n"
        f"for f in {FIELDS!r}: __import__('neurips26.' + f)\n"
        "loaded = [m for m in sys.modules if m.startswith('neurips26.') and m.count('.') >= 2]\n"
        "import json; print(json.dumps(['torch' in sys.modules, sorted(loaded)]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    torch_loaded, loaded = json.loads(out)
    assert torch_loaded is False
    papers_loaded = [m for m in loaded if not m.startswith("neurips26.harness.")]
    assert papers_loaded == [], "importing a field package imported a paper package"


@pytest.mark.parametrize("p", BUILT, ids=lambda p: p.slug)
def test_every_public_name_imports_from_its_package_and_its_field(p):
    pytest.importorskip("torch")
    module = importlib.import_module(p.module)
    assert tuple(module.__all__) == p.api
    field = importlib.import_module(f"neurips26.{p.field}")
    for name in p.api:
        value = getattr(module, name)  # AttributeError: __all__ names something the package does not define
        assert getattr(field, name) is value, f"from neurips26.{p.field} import {name}"


def test_readme_table_shows_each_papers_all():
    readme = (REPO / "README.md").read_text()
    table = readme.split(README_START, 1)[1].split(README_END, 1)[0].strip()
    assert table == papers.markdown_table(), "README table is stale: run `neurips26 readme`"
    rows = {line.split(" | ")[0].strip("| `"): line.split(" | ")[-1] for line in table.splitlines()[2:]}
    for p in BUILT:
        cell = rows[p.slug].rstrip(" |")
        shown = [part.strip("`") for part in cell.split(" and ")[0].split(", ")]
        assert shown == list(p.api[:3]), p.slug
        if len(p.api) > 3:
            assert cell.endswith(f" and {len(p.api) - 3} more"), p.slug


def test_show_prints_every_public_name():
    runner = CliRunner()
    for p in BUILT:
        out = " ".join(runner.invoke(app, ["show", p.slug], terminal_width=10_000).output.split())
        assert f"from neurips26.{p.field} import {', '.join(p.api)}" in out, p.slug


# -- the helpers on a scratch field -------------------------------------------------------------------------


def _field(tmp_path: Path, packages: dict[str, str], modules: dict[str, str] | None = None) -> Path:
    root = tmp_path / "scratchfield"
    root.mkdir()
    (root / "__init__.py").write_text('"""A scratch field."""\n')
    for name, init in packages.items():
        (root / name).mkdir()
        (root / name / "__init__.py").write_text(init)
    for name, text in (modules or {}).items():
        (root / f"{name}.py").write_text(text)
    return root / "__init__.py"


def test_a_name_in_two_papers_is_a_reported_clash_not_a_silent_choice(tmp_path):
    init = _field(
        tmp_path,
        {"paper_a": '__all__ = ["fit", "Alpha"]\n', "paper_b": '__all__ = ["Beta", "fit"]\n'},
        {"shared": '__all__ = ["Alpha", "helper"]\n'},
    )
    exports, problems = field_exports("scratchfield", init, modules=(".shared",))
    assert exports == {"Beta": ".paper_b", "helper": ".shared"}
    assert set(problems) == {"fit", "Alpha"}
    assert "scratchfield.paper_a and scratchfield.paper_b" in problems["fit"]
    assert "scratchfield.paper_a and scratchfield.shared" in problems["Alpha"]
    getattr_, dir_, all_ = attach("scratchfield", exports, problems)
    assert all_ == dir_() == ["Beta", "helper"]
    with pytest.raises(AttributeError, match="public in both scratchfield.paper_a and scratchfield.paper_b"):
        getattr_("fit")
    with pytest.raises(AttributeError, match="has no attribute 'nothing'$"):
        getattr_("nothing")


@pytest.mark.parametrize(
    "text",
    [
        "from .m import f\n",  # no __all__
        "__all__ = ['f'] + ['g']\n",  # computed
        "__all__ = ('f', 'g')\n",  # a tuple, not a list
        "__all__ = ['f', 1]\n",
        "__all__ = ['f', 'f']\n",  # repeated
        "__all__ = ['f']\n__all__ = ['g']\n",  # written twice
        "__all__ = ['f']\n__all__ += ['g']\n",  # extended
    ],
)
def test_an_all_that_is_not_one_literal_list_of_distinct_strings_is_refused(tmp_path, text):
    path = tmp_path / "__init__.py"
    path.write_text(text)
    with pytest.raises(PublicNamesError, match="__init__.py"):
        public_names(path)
    exports, problems = field_exports(
        "scratchfield", _field(tmp_path, {"broken": text, "fine": "__all__ = ['ok']"})
    )
    assert exports == {"ok": ".fine"} and list(problems) == [".broken"]


def test_shared_modules_must_be_a_tuple_not_a_string(tmp_path):
    with pytest.raises(TypeError, match="tuple"):
        field_exports("scratchfield", _field(tmp_path, {}), modules=".mdp")


def test_public_names_keeps_the_written_order(tmp_path):
    path = tmp_path / "__init__.py"
    path.write_text('"""Doc."""\n\nfrom .m import b, a\n\n__all__ = [\n    "b",\n    "a",\n]\n')
    assert public_names(path) == ("b", "a")
