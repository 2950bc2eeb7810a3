"""The ``neurips26`` command: list, show, run, report, bench.

Listing and showing read the registry only (no implementation, no torch is imported), so they start fast.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from . import papers

app = typer.Typer(
    help="neurips26: reference implementations of NeurIPS 2026 methods with honest reproductions.",
    no_args_is_help=True,
    add_completion=False,
)
console = Console(width=None if sys.stdout.isatty() else 140)
err_console = Console(stderr=True)

_VERDICT_STYLE = {
    "reproduced": "green",
    "partial": "yellow",
    "not-reproduced": "red",
    "error": "bold red",
    "implemented": "cyan",
    "planned": "dim",
}


def _styled(word: str | None) -> str:
    if not word:
        return "-"
    return f"[{_VERDICT_STYLE.get(word, 'white')}]{word}[/]"


def _unknown(slugs: list[str]) -> list[str]:
    known = set(papers.slugs())
    return [s for s in slugs if s not in known]


@app.command("list")
def list_papers(
    out: Annotated[Path, typer.Option(help="results folder to read last verdicts from")] = Path("results"),
) -> None:
    """One row per paper: slug, title, field, tier, status and the last verdict found in OUT."""
    from .harness.runner import load_result

    table = Table(title=f"neurips26: {len(papers.PAPERS)} papers", show_lines=False)
    for col in ("slug", "title", "field", "tier", "status", "last verdict"):
        table.add_column(col, overflow="fold")
    for p in papers.PAPERS:
        result = load_result(p.slug, out)
        last = None
        if result is not None:
            last = "error" if result.get("status") == "error" else f"{result['verdict']} ({result['mode']})"
        title = p.title if len(p.title) <= 60 else p.title[:57] + "..."
        table.add_row(p.slug, title, p.field, p.tier, _styled(p.status), last or "-")
    console.print(table)


@app.command()
def show(slug: str) -> None:
    """The claim, the checks, the API and where the code is, for one paper."""
    if _unknown([slug]):
        err_console.print(f"unknown slug {slug!r}; see `neurips26 list`")
        raise typer.Exit(2)
    p = papers.get(slug)
    console.print(f"[bold]{p.title}[/]  ({p.slug})")
    console.print(f"seed {p.seed_file}, abstract {p.abstract}; arXiv {p.arxiv or 'not found'}; tier {p.tier}")
    console.print(f"field: {p.field}   status: {_styled(p.status)}")
    if p.status_note:
        console.print(f"status note: {p.status_note}")
    console.print(f"\n[bold]Reproduction check[/] (digest): {p.check}")
    console.print(f"\n[bold]Code[/]: {p.source_dir}/   experiment: {p.experiment}")
    if p.api:
        names = ", ".join(p.api)
        console.print(f"[bold]API[/]: from {p.module.rsplit('.', 1)[0]} import {names}")
    from .harness.runner import load_result

    result = load_result(slug)
    if result and result.get("checks"):
        console.print(
            f"\n[bold]Last run[/] ({result['mode']}, seed {result['seed']}): {_styled(result['verdict'])}"
        )
        _print_checks(result)


def _print_checks(result: dict[str, Any]) -> None:
    for c in result["checks"]:
        mark = "[green]PASS[/]" if c["passed"] else "[red]FAIL[/]"
        measured = "nan" if c["measured"] is None else f"{c['measured']:.4g}"
        thr = c["threshold"]
        thr_s = f"[{thr[0]:.4g}, {thr[1]:.4g}]" if isinstance(thr, list) else f"{thr:.4g}"
        console.print(f"  {mark} {c['name']}: {measured} {c['op']} {thr_s}")


def _print_result(result: dict[str, Any]) -> None:
    slug = result["slug"]
    if result["status"] == "error":
        console.print(f"[bold red]{slug}: experiment crashed[/]")
        console.print(result.get("error", ""), markup=False, highlight=False)
        return
    for t in result["tables"]:
        table = Table(title=f"{slug}: {t['name']}", caption=t.get("caption") or None)
        for col in t["columns"]:
            table.add_column(col)
        for row in t["rows"]:
            table.add_row(*[_fmt(row.get(col)) for col in t["columns"]])
        console.print(table)
    _print_checks(result)
    expected = result["expected_verdict"]
    line = f"[bold]{slug}[/] ({result['mode']}, {result['total_seconds']:.1f} s): verdict {_styled(result['verdict'])}"
    if expected != "reproduced":
        line += f"  (declared: {expected} - {result['expected_reason']})"
    console.print(line + "\n")


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "-" if value is None else str(value)


class _RichSink:
    """Feeds a run's progress into a shared rich Progress."""

    def __init__(self, progress: Any) -> None:
        self.progress = progress

    def start(self, description: str, total: int | None) -> Any:
        return self.progress.add_task(description, total=total)

    def advance(self, task: Any, n: int = 1) -> None:
        self.progress.advance(task, n)

    def finish(self, task: Any) -> None:
        self.progress.remove_task(task)

    def log(self, message: str) -> None:
        self.progress.console.log(message, markup=False, highlight=False)


@app.command()
def run(
    slugs: Annotated[list[str] | None, typer.Argument(help="paper slugs to run")] = None,
    all_: Annotated[bool, typer.Option("--all", help="run every paper that has an experiment")] = False,
    quick: Annotated[
        bool, typer.Option("--quick/--full", help="quick (~1 min, CI) or full (paper scale)")
    ] = True,
    seed: Annotated[int, typer.Option(help="master seed")] = 0,
    seeds: Annotated[
        str | None, typer.Option(help="seed sweep, e.g. '0-9' or '0,3,7': median and spread per check")
    ] = None,
    out: Annotated[Path, typer.Option(help="results folder")] = Path("results"),
    as_json: Annotated[bool, typer.Option("--json", help="print the result JSON instead of tables")] = False,
    executor: Annotated[str, typer.Option(help="local | dask | dask-local")] = "local",
    scheduler: Annotated[str | None, typer.Option(help="Dask scheduler address, tcp://HOST:PORT")] = None,
    jobs: Annotated[int, typer.Option(help="parallel experiments (local pool or dask-local workers)")] = 1,
    threads: Annotated[
        int, typer.Option(help="BLAS/torch threads inside each experiment (0: library default)")
    ] = 1,
) -> None:
    """Run reproduction experiments; write OUT/<slug>/result.json and figures; print tables and verdicts.

    Exits non-zero for an unknown slug or a crashed experiment, not for a not-reproduced verdict.
    """
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from .harness.executor import EXECUTORS, SchedulerUnreachable, parse_seeds, run_many
    from .harness.runner import ExperimentNotAvailable, load_experiment

    if all_:
        chosen = [p.slug for p in papers.PAPERS if p.has_experiment]
    else:
        chosen = list(slugs or [])
        if not chosen:
            err_console.print("name at least one slug, or --all")
            raise typer.Exit(2)
        bad = _unknown(chosen)
        if bad:
            err_console.print(f"unknown slug(s): {', '.join(bad)}; see `neurips26 list`")
            raise typer.Exit(2)
    if executor not in EXECUTORS:
        err_console.print(f"--executor must be one of {', '.join(EXECUTORS)}, got {executor!r}")
        raise typer.Exit(2)
    try:
        seed_list = parse_seeds(seeds) if seeds else [seed]
    except ValueError as err:
        err_console.print(str(err))
        raise typer.Exit(2) from None
    failed = False
    runnable = []
    for slug in chosen:  # fail fast, before any work, on papers without an experiment
        try:
            load_experiment(slug)
            runnable.append(slug)
        except ExperimentNotAvailable as err:
            err_console.print(str(err))
            failed = True
    mode = "quick" if quick else "full"
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn())
    total = len(runnable) * len(seed_list)
    with Progress(*columns, console=err_console if as_json else console, transient=True) as progress:
        overall = progress.add_task(f"{total} experiment run(s), {mode} mode, {executor}", total=total)

        def on_result(result: dict[str, Any]) -> None:
            progress.advance(overall)
            if not as_json and len(seed_list) == 1:
                progress.console.print()
                _print_result(result)

        try:
            results = run_many(
                runnable,
                mode=mode,
                seeds=seed_list,
                out_dir=out,
                executor=executor,
                jobs=jobs,
                scheduler=scheduler,
                on_result=on_result,
                progress_sink=_RichSink(progress),
                threads=threads or None,
            )
        except (SchedulerUnreachable, ValueError, ImportError) as err:
            err_console.print(str(err))
            raise typer.Exit(2) from None
    failed |= any(r["status"] == "error" for r in results)
    if as_json:
        payload = results[0] if len(results) == 1 else results
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
    elif len(results) > 1:
        summary = Table(title="verdicts")
        for col in ("slug", "seed", "mode", "verdict", "checks passed", "seconds"):
            summary.add_column(col)
        for r in results:
            verdict = "error" if r["status"] == "error" else r["verdict"]
            passed = f"{sum(c['passed'] for c in r['checks'])}/{len(r['checks'])}"
            summary.add_row(
                r["slug"], str(r["seed"]), r["mode"], _styled(verdict), passed, f"{r['total_seconds']:.1f}"
            )
        console.print(summary)
    if len(seed_list) > 1:
        console.print(
            f"seed sweep summaries: {out}/<slug>/sweep-{mode}.json (median and spread of every check)"
        )
    if failed:
        raise typer.Exit(1)


@app.command()
def report(
    out: Annotated[Path, typer.Option(help="results folder to read and write")] = Path("results"),
) -> None:
    """Write OUT/REPORT.md and OUT/report.html from the stored results."""
    from .harness.report import write_report

    md, html = write_report(out)
    console.print(f"wrote {md} and {html}")


@app.command()
def bench(
    slugs: Annotated[list[str] | None, typer.Argument(help="paper slugs")] = None,
    all_: Annotated[bool, typer.Option("--all", help="every paper with a benchmark")] = False,
    full: Annotated[bool, typer.Option("--full", help="larger sizes")] = False,
    root: Annotated[Path, typer.Option(help="repository root holding benchmarks/")] = Path("."),
) -> None:
    """Run peer benchmarks (benchmarks/<slug>.py: our method and the peer on the same data, as ratios)."""
    bench_dir = (root / "benchmarks").resolve()
    if not bench_dir.is_dir():
        err_console.print(f"no benchmarks/ folder under {root.resolve()}; run from the repository root")
        raise typer.Exit(2)
    available = {
        f.stem.replace("_", "-"): f for f in sorted(bench_dir.glob("*.py")) if not f.stem.startswith("_")
    }
    chosen = sorted(available) if all_ else list(slugs or [])
    bad = [s for s in chosen if s not in available]
    if bad or not chosen:
        err_console.print(
            f"no benchmark for: {', '.join(bad) or '(none named)'}; available: {', '.join(available)}"
        )
        raise typer.Exit(2)
    sys.path.insert(0, str(bench_dir))
    for slug in chosen:
        module = importlib.import_module(available[slug].stem)
        rows = module.main(quick=not full)
        table = Table(title=f"benchmark: {slug}")
        columns: list[str] = []
        for row in rows:
            columns += [k for k in row if k not in columns]
        for col in columns:
            table.add_column(col)
        for row in rows:
            table.add_row(*[_fmt(row.get(c)) for c in columns])
        console.print(table)


README_START = "<!-- papers:start (generated by `neurips26 readme`) -->"
README_END = "<!-- papers:end -->"


@app.command(hidden=True)
def readme(path: Annotated[Path, typer.Option(help="README to update")] = Path("README.md")) -> None:
    """Rewrite the paper table in README.md from the registry."""
    text = path.read_text()
    if README_START not in text or README_END not in text:
        err_console.print(f"{path} lacks the table markers {README_START!r} ... {README_END!r}")
        raise typer.Exit(2)
    head, rest = text.split(README_START, 1)
    _, tail = rest.split(README_END, 1)
    path.write_text(head + README_START + "\n" + papers.markdown_table() + "\n" + README_END + tail)
    console.print(f"updated the paper table in {path}")


def main() -> None:  # pragma: no cover - console entry
    app()
