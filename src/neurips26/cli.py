"""The ``neurips26`` command: list, show, run, report, bench.

Listing and showing read the registry and the TOML claims declarations only (no implementation, no torch is
imported), so they start fast.
"""

from __future__ import annotations

import importlib
import json
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from . import __version__, papers

app = typer.Typer(
    help="neurips26: reference implementations of NeurIPS 2026 methods with honest reproductions.",
    no_args_is_help=True,
    add_completion=False,
)
console = Console(width=None if sys.stdout.isatty() else 140)
err_console = Console(stderr=True)

_STYLE = {
    "reproduced": "green",
    "pass": "green",
    "partial": "yellow",
    "inconclusive": "yellow",
    "not-reproduced": "red",
    "fail": "red",
    "error": "bold red",
    "unreadable": "bold red",
    "stale-schema": "bold red",
    "implemented": "cyan",
    "planned": "dim",
    "ok": "green",
    "stale": "yellow",
    "mismatch": "bold red",
    "not run": "dim",
}


def _styled(word: str | None) -> str:
    if not word:
        return "-"
    return f"[{_STYLE.get(word, 'white')}]{word}[/]"


def _version(value: bool) -> None:
    if value:
        console.print(f"neurips26 {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="print the version and exit")
    ] = False,
) -> None:
    """neurips26: reference implementations of NeurIPS 2026 methods with honest reproductions."""


def _unknown(slugs: list[str]) -> list[str]:
    known = set(papers.slugs())
    return [s for s in slugs if s not in known]


def _fail(message: str, code: int = 2) -> None:
    err_console.print(message, markup=False, highlight=False)
    raise typer.Exit(code)


def _last(result: dict[str, Any] | None) -> str:
    if result is None:
        return "-"
    status = result.get("status")
    if status != "ok":
        return f"{_styled(status)} ({result.get('mode')})"
    return f"{_styled(result.get('verdict'))} ({result.get('mode')})"


@app.command("list")
def list_papers(
    out: Annotated[Path, typer.Option(help="results folder to read last verdicts from")] = Path("results"),
) -> None:
    """One row per paper: slug, title, field, tier, derived status and the last verdict found in OUT."""
    from .harness.records import load_result

    table = Table(title=f"neurips26: {len(papers.PAPERS)} papers", show_lines=False)
    for col in ("slug", "title", "field", "tier", "status", "last run"):
        table.add_column(col, overflow="fold")
    for p in papers.PAPERS:
        title = p.title if len(p.title) <= 60 else p.title[:57] + "..."
        table.add_row(
            p.slug, escape(title), p.field, p.tier, _styled(p.status), _last(load_result(p.slug, out))
        )
    console.print(table)


@app.command()
def show(
    slug: str,
    out: Annotated[Path, typer.Option(help="results folder to read the last run from")] = Path("results"),
) -> None:
    """The claim, the declared checks (kind, threshold, expected outcome), the API and the last run."""
    if _unknown([slug]):
        _fail(f"unknown slug {slug!r}; see `neurips26 list`")
    p = papers.get(slug)
    console.print(f"[bold]{escape(p.title)}[/]  ({p.slug})")
    console.print(f"seed {p.seed_file}, abstract {p.abstract}; arXiv {p.arxiv or 'not found'}; tier {p.tier}")
    console.print(f"field: {p.field}   status: {_styled(p.status)}")
    console.print(f"\n[bold]Reproduction check[/] (digest): {escape(p.check)}")
    claims = p.claims
    if claims is None:
        console.print("\nNo claims declaration yet.")
    else:
        console.print(f"\n[bold]Declared checks[/] ({p.source_dir}/claims.toml):")
        for c in claims.checks:
            expect = ", ".join(f"{m}: {_styled(o)}" for m, o in c.expect.items())
            console.print(
                f"  [bold]{c.id}[/] {escape('[' + c.kind + ']')} {escape(c.condition())}   expected {expect}"
            )
            console.print(f"      {escape(c.measures)}")
            if c.gates:
                console.print(f"      gates: {', '.join(c.gates)} (inconclusive unless this passes)")
            if c.confirmed_on:
                console.print(f"      quick expectation confirmed on held-out seeds {list(c.confirmed_on)}")
            if c.reason:
                console.print(f"      reason: {escape(c.reason)}")
                if c.explained_by:
                    console.print(f"      explained by: {', '.join(c.explained_by)}")
        for mode in ("quick", "full"):
            v = claims.expected_verdict(mode)
            if v:
                console.print(f"  expected verdict, {mode} mode: {_styled(v)}")
        if claims.quick:
            console.print(f"\n[bold]Quick mode[/]: {escape(claims.quick)}")
        if claims.deviations:
            console.print("[bold]Deviations from the digest[/]:")
            for d in claims.deviations:
                console.print(f"  - {escape(d)}")
    console.print(f"\n[bold]Code[/]: {p.source_dir}/   experiment: {p.experiment}")
    if p.benchmark:
        console.print(f"[bold]Peer benchmark[/]: neurips26 bench {p.slug}")
    if p.api:
        console.print(f"[bold]API[/]: from neurips26.{p.field} import {', '.join(p.api)}")
    from .harness.records import load_result

    for mode in ("quick", "full"):
        result = load_result(slug, out, mode)
        if result is None:
            continue
        if result.get("status") != "ok":
            console.print(
                f"\n[bold]Last {mode} run[/]: {_styled(result.get('status'))} ({escape(str(result.get('path')))})"
            )
            continue
        console.print(f"\n[bold]Last {mode} run[/] (seed {result['seed']}): {_styled(result['verdict'])}")
        _print_checks(result)


def _print_checks(result: dict[str, Any]) -> None:
    from .harness.run import describe

    for c in result.get("checks", []):
        text = describe(c)
        mark, _, rest = text.partition("  ")
        flag = "" if c["outcome"] == c["expected"] else f"  [bold red](declared {c['expected']})[/]"
        console.print(f"  {_styled(c['outcome'])} {escape('[' + c['kind'] + ']')} {escape(rest)}{flag}")


def _print_result(result: dict[str, Any]) -> None:
    slug = result["slug"]
    if result["status"] != "ok":
        console.print(f"[bold red]{slug}: {result['status']}[/]")
        console.print(result.get("error", ""), markup=False, highlight=False)
        _print_checks(result)
        return
    for t in result["tables"]:
        table = Table(title=f"{slug}: {t['name']}", caption=t.get("caption") or None)
        for col in t["columns"]:
            table.add_column(escape(col))
        for row in t["rows"]:
            table.add_row(*[escape(_fmt(row.get(col))) for col in t["columns"]])
        console.print(table)
    _print_checks(result)
    line = (
        f"[bold]{slug}[/] ({result['mode']}, seed {result['seed']}, {result['total_seconds']:.1f} s): "
        f"verdict {_styled(result['verdict'])} (declared {result.get('expected_verdict')})"
    )
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


def check_out_dir(out: Path) -> None:
    """Create ``out`` and prove it writable before any work starts; exit 2 naming the problem otherwise."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out, prefix=".write-probe-"):
            pass
    except OSError as err:
        _fail(f"--out {str(out)!r} is not a writable folder: {err.strerror or err}")


@app.command()
def run(
    slugs: Annotated[list[str] | None, typer.Argument(help="paper slugs to run")] = None,
    all_: Annotated[bool, typer.Option("--all", help="run every paper that has an experiment")] = False,
    quick: Annotated[bool, typer.Option("--quick", help="quick mode, the default (<= 30 s, CI)")] = False,
    full: Annotated[bool, typer.Option("--full", help="full mode (paper scale)")] = False,
    seed: Annotated[int | None, typer.Option(help="master seed (default 0)")] = None,
    seeds: Annotated[
        str | None, typer.Option(help="seed sweep, e.g. '0-2' or '0,3,7': each check's outcome per seed")
    ] = None,
    out: Annotated[Path, typer.Option(help="results folder")] = Path("results"),
    as_json: Annotated[
        bool, typer.Option("--json", help="print one JSON document instead of tables")
    ] = False,
    executor: Annotated[str, typer.Option(help="local | dask | dask-local")] = "local",
    scheduler: Annotated[str | None, typer.Option(help="Dask scheduler address, tcp://HOST:PORT")] = None,
    jobs: Annotated[
        int, typer.Option(help="parallel experiments (local processes or dask-local workers)")
    ] = 1,
    threads: Annotated[
        int, typer.Option(help="BLAS/torch threads inside each experiment (0: the libraries' default)")
    ] = 1,
    strict: Annotated[
        bool, typer.Option("--strict", help="exit 1 when any check's outcome differs from its declaration")
    ] = False,
    timeout: Annotated[
        float | None, typer.Option(help="seconds before a task is killed (local processes, --jobs > 1)")
    ] = None,
    experiment: Annotated[
        str | None, typer.Option(hidden=True, help="module:function to run instead of the registry's (tests)")
    ] = None,
) -> None:
    """Run reproduction experiments; write OUT/<slug>/<mode>/<run-id>/; print tables and verdicts.

    Exits 2 for bad usage, 1 for a crashed experiment (or, with --strict, a check that differs from its
    declaration), never for an honest not-reproduced verdict; 130 on Ctrl-C and 143 on SIGTERM, after the
    running experiments are stopped and their unfinished run folders removed.
    """
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from .harness.deps import MissingDependency
    from .harness.executor import (
        EXECUTORS,
        SchedulerUnreachable,
        Terminated,
        check_options,
        parse_seeds,
        run_many,
    )
    from .harness.runner import ExperimentNotAvailable, check_runnable

    if all_ and slugs:
        _fail("name slugs or --all, not both")
    if all_:
        chosen = [p.slug for p in papers.PAPERS if p.has_experiment]
    else:
        chosen = list(slugs or [])
        if not chosen:
            _fail("name at least one slug, or --all")
        bad = [] if experiment else _unknown(chosen)
        if bad:
            _fail(f"unknown slug(s): {', '.join(bad)}; see `neurips26 list`")
    if executor not in EXECUTORS:
        _fail(f"--executor must be one of {', '.join(EXECUTORS)}, got {executor!r}")
    if quick and full:
        _fail("give --quick or --full, not both")
    if seeds is not None and seed is not None:
        _fail("give --seed or --seeds, not both")
    if seed is not None and seed < 0:
        _fail(f"--seed must be a non-negative integer, got {seed}")
    if threads < 0:
        _fail(f"--threads must be >= 0, got {threads}")
    if timeout is not None and (executor != "local" or jobs < 2):
        _fail("--timeout needs --jobs > 1 (local worker processes): a task in this process cannot be stopped")
    try:
        seed_list = parse_seeds(seeds) if seeds is not None else [seed or 0]
        check_options(executor, jobs, scheduler, seed_list, timeout)
    except ValueError as err:
        _fail(str(err))
    check_out_dir(out)
    failed = False
    runnable = []
    for slug in chosen:  # fail fast, before any work and without importing it: no experiment, a missing extra
        try:
            check_runnable(slug, experiment)
            runnable.append(slug)
        except (ExperimentNotAvailable, MissingDependency) as err:
            err_console.print(str(err), markup=False, highlight=False)
            failed = True
    mode = "full" if full else "quick"
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn())
    total = len(runnable) * len(seed_list)
    try:
        with Progress(*columns, console=err_console if as_json else console, transient=True) as progress:
            overall = progress.add_task(f"{total} experiment run(s), {mode} mode, {executor}", total=total)

            def on_result(result: dict[str, Any]) -> None:
                progress.advance(overall)
                if not as_json and len(seed_list) == 1:
                    progress.console.print()
                    _print_result(result)

            results, sweeps = run_many(
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
                task_timeout=timeout,
                experiment=experiment,
            )
    except (SchedulerUnreachable, ValueError, ImportError) as err:
        _fail(str(err))
    except KeyboardInterrupt as err:
        how = "terminated (SIGTERM)" if isinstance(err, Terminated) else "interrupted"
        err_console.print(f"{how}: queued experiments cancelled, running ones stopped")
        raise typer.Exit(143 if isinstance(err, Terminated) else 130) from None
    failed |= any(r["status"] != "ok" for r in results)
    surprises = [
        (r["slug"], r["seed"], c)
        for r in results
        if r["status"] == "ok"
        for c in r["checks"]
        if c["outcome"] != c["expected"]
    ]
    if as_json:
        sys.stdout.write(json.dumps({"results": results, "sweeps": sweeps}, indent=2) + "\n")
    else:
        if len(results) > 1:
            summary = Table(title="verdicts")
            for col in ("slug", "seed", "mode", "verdict", "claim checks passed", "as declared", "seconds"):
                summary.add_column(col)
            for r in results:
                verdict = r["verdict"] if r["status"] == "ok" else r["status"]
                claim = [c for c in r["checks"] if c["kind"] == "claim"]
                passed = f"{sum(c['outcome'] == 'pass' for c in claim)}/{len(claim)}"
                same = all(c["outcome"] == c["expected"] for c in r["checks"]) and r["status"] == "ok"
                summary.add_row(
                    r["slug"],
                    str(r["seed"]),
                    r["mode"],
                    _styled(verdict),
                    passed,
                    "yes" if same else "[red]no[/]",
                    f"{r['total_seconds']:.1f}",
                )
            console.print(summary)
        for slug, s, c in surprises:
            console.print(
                f"[red]surprise[/] {slug} seed {s}: {c['id']} declared {c['expected']}, measured {c['outcome']}"
            )
        if sweeps:
            console.print(f"seed sweep summaries: {out}/<slug>/{mode}/sweeps/<sweep-id>/summary.json")
    if failed or (strict and surprises):
        raise typer.Exit(1)


@app.command()
def report(
    out: Annotated[Path, typer.Option(help="results folder to read and write")] = Path("results"),
) -> None:
    """Write OUT/REPORT.md and OUT/report.html from the stored results."""
    from .harness.report import write_report

    check_out_dir(out)
    md, html = write_report(out)
    console.print(f"wrote {md} and {html}")


@app.command()
def bench(
    slugs: Annotated[list[str] | None, typer.Argument(help="paper slugs")] = None,
    all_: Annotated[bool, typer.Option("--all", help="every paper with a benchmark")] = False,
    full: Annotated[bool, typer.Option("--full", help="larger sizes")] = False,
    out: Annotated[Path, typer.Option(help="results folder (writes OUT/<slug>/bench.json)")] = Path(
        "results"
    ),
) -> None:
    """Run peer benchmarks (our method and the peer on the same data, one process, as ratios)."""
    from .harness.deps import hint
    from .harness.environment import capture_environment
    from .harness.records import write_json_atomic
    from .harness.runner import _use_agg

    available = {p.slug: p for p in papers.PAPERS if p.benchmark}
    if all_ and slugs:
        _fail("name slugs or --all, not both")
    chosen = sorted(available) if all_ else list(slugs or [])
    bad = [s for s in chosen if s not in available]
    if bad or not chosen:
        _fail(f"no benchmark for: {', '.join(bad) or '(none named)'}; available: {', '.join(available)}")
    check_out_dir(out)
    _use_agg()
    failed = False
    for slug in chosen:
        module_name, _, func = available[slug].benchmark.partition(":")  # type: ignore[union-attr]
        started = datetime.now(UTC).isoformat(timespec="seconds")
        try:
            rows = getattr(importlib.import_module(module_name), func)(quick=not full)
        except ModuleNotFoundError as err:
            err_console.print(f"{slug}: {hint(err.name, available[slug].field)}", markup=False)
            failed = True
            continue
        except Exception as err:  # one failing benchmark must not stop the rest
            err_console.print(f"{slug}: benchmark crashed: {err!r}", markup=False)
            failed = True
            continue
        record = {
            "slug": slug,
            "mode": "full" if full else "quick",
            "written_at": started,
            "rows": rows,
            "environment": capture_environment(),
        }
        from .harness.run import jsonable

        write_json_atomic(out / slug / "bench.json", jsonable(record))
        table = Table(title=f"benchmark: {slug}")
        columns: list[str] = []
        for row in rows:
            columns += [k for k in row if k not in columns]
        for col in columns:
            table.add_column(escape(col))
        for row in rows:
            table.add_row(*[escape(_fmt(row.get(c))) for c in columns])
        console.print(table)
    if failed:
        raise typer.Exit(1)


@app.command()
def evidence(
    slugs: Annotated[
        list[str] | None, typer.Argument(help="paper slugs (default: report every paper)")
    ] = None,
    commit: Annotated[
        bool,
        typer.Option("--commit", help="copy the latest full run of each named paper to evidence/<slug>/"),
    ] = False,
    all_: Annotated[
        bool, typer.Option("--all", help="with --commit: every paper whose latest full run is complete")
    ] = False,
    out: Annotated[Path, typer.Option(help="results folder to take full runs from")] = Path("results"),
) -> None:
    """Committed full-run records: their state (ok, stale, mismatch, not run), or --commit new ones."""
    from .harness.evidence import EVIDENCE, commit_evidence, evidence_state
    from .harness.records import load_result

    chosen = list(slugs or [])
    if _unknown(chosen):
        _fail(f"unknown slug(s): {', '.join(_unknown(chosen))}; see neurips26 list")
    if all_ and (chosen or not commit):
        _fail("--all goes with --commit and no slugs")
    if all_:
        chosen = [s for s in papers.slugs() if (load_result(s, out, "full") or {}).get("status") == "ok"]
    if commit:
        if not chosen:
            _fail("--commit needs the slugs whose full runs to commit (or --all)")
        for slug in chosen:
            try:
                dest = commit_evidence(slug, out)
            except (FileNotFoundError, ValueError) as err:
                _fail(str(err))
            console.print(
                f"{slug}: committed {dest.relative_to(EVIDENCE.parent)} ({evidence_state(slug).summary()})"
            )
        return
    table = Table(title="full-run evidence (evidence/<slug>/result.json)")
    for col in ("paper", "state", "verdict", "date", "why"):
        table.add_column(col)
    bad = False
    for slug in chosen or papers.slugs():
        ev = evidence_state(slug)
        why = "; ".join(ev.changed[:3] + ev.surprises[:3]) or ev.error
        bad |= ev.state in ("mismatch", "unreadable")
        table.add_row(slug, _styled(ev.state), _styled(ev.verdict), ev.date, escape(why))
    console.print(table)
    if bad:
        raise typer.Exit(1)


README_START = "<!-- papers:start (generated by `neurips26 readme`) -->"
README_END = "<!-- papers:end -->"


@app.command(hidden=True)
def readme(path: Annotated[Path, typer.Option(help="README to update")] = Path("README.md")) -> None:
    """Rewrite the paper table in README.md from the registry."""
    text = path.read_text()
    if README_START not in text or README_END not in text:
        _fail(f"{path} lacks the table markers {README_START!r} ... {README_END!r}")
    head, rest = text.split(README_START, 1)
    _, tail = rest.split(README_END, 1)
    path.write_text(head + README_START + "\n" + papers.markdown_table() + "\n" + README_END + tail)
    console.print(f"updated the paper table in {path}")
    from .harness.evidence import EVIDENCE, evidence_markdown

    page = path.parent / EVIDENCE.name / "README.md"
    page.parent.mkdir(exist_ok=True)
    page.write_text(evidence_markdown())
    console.print(f"updated {page}")
