"""Sources of the documentation site, generated from what the code already says (``make docs``).

``python -m neurips26._docs DEST`` writes a MkDocs source tree to ``DEST``: the hand-written pages of ``docs/``,
then one page per paper and one API page per paper, generated from the registry, each package's docstrings and
``__all__``, its ``claims.toml`` and its committed full run (``evidence/<slug>/``), and a conference page with
the verdict table and figure. Nothing here imports a paper (the API pages are rendered by mkdocstrings from the
source), so the site is built without torch, and it cannot drift from the code it documents.

A worked example is ``docs/examples/<slug>.md``: prose and Python blocks that the test suite executes
(``tests/test_docs.py``), run here as well so that the page shows the output it printed.
"""

from __future__ import annotations

import ast
import contextlib
import io
import shutil
import sys
import tempfile
from collections import Counter
from functools import cache
from pathlib import Path
from typing import Any

from . import papers
from .harness.evidence import EVIDENCE, evidence_state

REPO = papers._ROOT.parents[1]
DOCS = REPO / "docs"
FENCE = "```"


def _docstring(path: Path) -> str:
    try:
        return ast.get_docstring(ast.parse(path.read_text())) or ""
    except (OSError, SyntaxError):
        return ""


def _method_modules(p: papers.Paper) -> list[Path]:
    """The modules the package's ``__init__`` imports its public names from, in import order."""
    init = p.package_dir / "__init__.py"
    tree = ast.parse(init.read_text())
    out: list[Path] = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            path = p.package_dir / (node.module.replace(".", "/") + ".py")
            if path.exists() and path not in out:
                out.append(path)
    return out


def _code(text: str) -> str:
    """A docstring as Markdown: its indented blocks (formulas, examples) as fenced text, prose as it is."""
    lines, out, block = text.splitlines(), [], []

    def flush() -> None:
        if block:
            out.extend([f"{FENCE}text", *[b[4:] if b.startswith("    ") else b for b in block], FENCE])
            block.clear()

    for line in lines:
        if line.startswith("    ") or (block and not line.strip()):
            block.append(line)
        else:
            flush()
            out.append(line.replace("``", "`"))
    flush()
    return "\n".join(out)


def _run_example(text: str) -> str:
    """Execute the Python blocks of an example in one namespace; each block is followed by what it printed.

    The blocks run in a scratch working directory, so files an example writes (a store, a cache) stay out of the
    checkout."""
    with tempfile.TemporaryDirectory(prefix="neurips26-example-") as scratch, contextlib.chdir(scratch):
        return _run_blocks(text)


def _run_blocks(text: str) -> str:
    out, namespace, lines, i = [], {"__name__": "__docs__"}, text.splitlines(), 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        if line.strip() == f"{FENCE}python":
            body = []
            i += 1
            while lines[i].strip() != FENCE:
                body.append(lines[i])
                out.append(lines[i])
                i += 1
            out.append(lines[i])
            buffer = io.StringIO()
            with contextlib.redirect_stdout(buffer):
                exec(compile("\n".join(body), "<example>", "exec"), namespace)  # noqa: S102 - our own docs
            printed = buffer.getvalue().rstrip()
            if printed:
                out += ["", "Output:", "", f"{FENCE}text", printed, FENCE]
        i += 1
    return "\n".join(out)


def _checks_table(p: papers.Paper) -> list[str]:
    claims = p.claims
    if claims is None:
        return ["No claims declaration yet."]
    ev = evidence_state(p.slug)
    measured = {c["id"]: c for c in (ev.record or {}).get("checks", [])} if ev.record else {}
    rows = [
        "| check | kind | measures | condition | quick: declared | full: declared | full: measured |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c in claims.checks:
        m = measured.get(c.id)
        value = "-"
        if m is not None:
            value = f"{m.get('measured')} ({m.get('outcome')})"
            if m.get("interval"):
                value = f"{m.get('measured')} [{m['interval'][0]}, {m['interval'][1]}] ({m.get('outcome')})"
        cells = [
            f"`{c.id}`",
            c.kind + (f" (gates {', '.join(c.gates)})" if c.gates else ""),
            c.measures,
            c.condition(),
            c.expect.get("quick", "-"),
            c.expect.get("full", "-"),
            value,
        ]
        rows.append("| " + " | ".join(str(x).replace("|", "/") for x in cells) + " |")
    return rows


def paper_page(p: papers.Paper, dest: Path, run_examples: bool = True) -> str:
    claims = p.claims
    ev = evidence_state(p.slug)
    link = f"[arXiv {p.arxiv}](https://arxiv.org/abs/{p.arxiv})" if p.arxiv else "no arXiv id found"
    md = [f"# {p.title}", ""]
    md += [
        f"`{p.slug}` · {link} · field `{p.field}` · tier {p.tier} · code `{p.source_dir}/`",
        "",
        f"**Verdict.** Quick mode (checked by `make test`): **{p.status}**. Full mode: declared "
        f"**{p.full_status}**, measured **{ev.summary()}**.",
        "",
        "## The claim",
        "",
        f"The digest's reproduction check: {p.check}",
        "",
    ]
    if claims is not None and claims.summary:
        md += [claims.summary, ""]
    md += ["## The method", ""]
    doc = _docstring(p.package_dir / "__init__.py")
    if doc:
        md += [_code(doc), ""]
    for module in _method_modules(p):
        text = _docstring(module)
        if text:
            md += [f"### `{module.stem}`", "", _code(text), ""]
    example = DOCS / "examples" / f"{p.slug}.md"
    md += ["## Example", ""]
    if example.exists():
        text = example.read_text()
        md += [_run_example(text) if run_examples else text, ""]
    else:
        md += [f"No worked example yet; the [API reference](../api/{p.slug}.md) lists every public name.", ""]
    md += ["## Declared checks", "", *_checks_table(p), ""]
    if claims is not None and claims.quick:
        md += [f"**Quick mode:** {claims.quick}", ""]
    if claims is not None and claims.deviations:
        md += ["## Deviations from the digest", "", *[f"- {d}" for d in claims.deviations], ""]
    md += ["## Full run", ""]
    if ev.record is None:
        md += [
            "No full run is committed yet (`neurips26 run SLUG --full`, then `neurips26 evidence --commit`).",
            "",
        ]
    else:
        rec = ev.record
        md += [f"State **{ev.state}**, seed {rec.get('seed')}, started {rec.get('started_at')}.", ""]
        figures = dest / "papers" / p.slug
        for fig in rec.get("figures", []):
            src = EVIDENCE / p.slug / fig["path"]
            if src.exists():
                figures.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, figures / fig["path"])
                md += [f"![{fig['name']}]({p.slug}/{fig['path']})", ""]
                if fig.get("caption"):
                    md += [f"*{fig['caption']}*", ""]
    md += ["## Peer benchmark", ""]
    if p.benchmark:
        md += [
            f"`neurips26 bench {p.slug}` runs our method and its peer on the same data (`{p.benchmark}`).",
            "",
        ]
    else:
        md += ["No peer implementation to compare against.", ""]
    md += [
        "## API",
        "",
        f"See the [API reference](../api/{p.slug}.md): " + ", ".join(f"`{n}`" for n in p.api),
        "",
    ]
    return "\n".join(md)


@cache
def _griffe_root() -> Any:
    """The whole package, loaded statically once: griffe loads every parent and submodule of what it is asked for."""
    import griffe

    return griffe.GriffeLoader(search_paths=[str(papers._ROOT.parent)]).load("neurips26")


def _documented(p: papers.Paper) -> dict[str, str]:
    """Each public name with the kind of object griffe finds for it statically ("" where it cannot say)."""
    package = _griffe_root()[p.module.removeprefix("neurips26.")]
    out = {}
    for name in p.api:
        try:
            obj = package[name]
            out[name] = (obj.final_target if obj.is_alias else obj).kind.value
        except Exception:  # an alias griffe cannot follow (a tuple-unpacked constant, a compiled object)
            out[name] = ""
    return out


def api_page(p: papers.Paper) -> str:
    md = [f"# API: {p.title}", "", f"`from {p.module} import ...` (also from `neurips26.{p.field}`)", ""]
    for name, kind in _documented(p).items():
        if kind in ("class", "function"):
            md += [f"::: {p.module}.{name}", "    options:", "      show_root_heading: true", ""]
        else:
            md += [f"## `{name}`", "", f"A {kind or 'constant'} of `{p.module}` (see its source).", ""]
    return "\n".join(md)


def conference_page(dest: Path) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    counts: Counter[tuple[str, str]] = Counter((p.field, p.status) for p in papers.PAPERS)
    fields = sorted({p.field for p in papers.PAPERS})
    colours = {
        "reproduced": "#2e7d32",
        "partial": "#f9a825",
        "inconclusive": "#9e9e9e",
        "not-reproduced": "#c62828",
    }
    fig, ax = plt.subplots(figsize=(6.5, 0.22 * len(fields) + 1.0))
    left = [0] * len(fields)
    for status, colour in colours.items():
        vals = [counts[(f, status)] for f in fields]
        ax.barh(fields, vals, left=left, color=colour, label=status, edgecolor="white")
        left = [a + b for a, b in zip(left, vals, strict=True)]
    ax.invert_yaxis()
    ax.set_xlabel("papers (declared quick-mode verdict, checked by the test suite)")
    ax.legend(fontsize=7, ncol=4, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    fig.savefig(dest / "verdicts.png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    md = ["# The conference", "", "![verdicts by field](verdicts.png)", ""]
    md += [
        "| paper | field | tier | quick | full: declared | full: measured |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for p in papers.PAPERS:
        ev = evidence_state(p.slug)
        md.append(
            f"| [{p.title}](papers/{p.slug}.md) | {p.field} | {p.tier} | {p.status} | {p.full_status} "
            f"| {ev.summary()} |"
        )
    return "\n".join(md) + "\n"


def write_sources(dest: Path, run_examples: bool = True) -> list[Path]:
    """Write the site's Markdown sources to ``dest`` (emptied first); returns the pages written."""
    dest = Path(dest)
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(DOCS, dest, ignore=shutil.ignore_patterns("examples"))
    (dest / "papers").mkdir()
    (dest / "api").mkdir()
    pages = [dest / "conference.md"]
    pages[0].write_text(conference_page(dest))
    for p in papers.PAPERS:
        page = dest / "papers" / f"{p.slug}.md"
        page.write_text(paper_page(p, dest, run_examples))
        api = dest / "api" / f"{p.slug}.md"
        api.write_text(api_page(p))
        pages += [page, api]
    return pages


if __name__ == "__main__":
    written = write_sources(Path(sys.argv[1] if len(sys.argv) > 1 else "build/docs"))
    print(f"wrote {len(written)} generated pages")
