"""``results/REPORT.md`` and ``results/report.html``, both from one Markdown source.

The report opens with what a reader must not miss: every surprise (a check whose outcome differs from its
declaration, a crash, a stale or unreadable record), then a figure of verdicts by field and the summary table.
Each paper's section puts its declaration beside the measurements, check by check (declared outcome, measured
value with its seed interval, outcome) for quick and full mode, then the reasons, the tables, the figures, the
seed sweeps and the peer-benchmark rows. The HTML is the same Markdown rendered by markdown-it-py.
"""

from __future__ import annotations

import html as _html
import os
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .. import papers
from .claims import fill_reason
from .environment import git_state
from .evidence import evidence_state
from .records import BROKEN, load_bench, load_result, load_sweep, write_text_atomic
from .run import fmt_number, unmet_preconditions

MODES = ("quick", "full")
_OUTCOME_CLASS = {
    "pass": "o-pass",
    "fail": "o-fail",
    "inconclusive": "o-inc",
    "reproduced": "o-pass",
    "partial": "o-inc",
    "not-reproduced": "o-fail",
    "error": "o-err",
    "unreadable": "o-err",
    "stale-schema": "o-err",
}
_VERDICT_COLOURS = {
    "reproduced": "#2e7d32",
    "partial": "#f9a825",
    "inconclusive": "#8e8e8e",
    "not-reproduced": "#c62828",
    "error": "#6a1b9a",
    "implemented": "#4fc3f7",
    "planned": "#e0e0e0",
}


def _tag(word: str | None) -> str:
    if not word:
        return "-"
    cls = _OUTCOME_CLASS.get(word)
    return f'<span class="{cls}">{word}</span>' if cls else word


def _cell(value: Any) -> str:
    if isinstance(value, list) and len(value) == 2 and all(isinstance(v, (int, float)) for v in value):
        return f"[{fmt_number(value[0])}, {fmt_number(value[1])}]"
    text = fmt_number(value)
    return text.replace("|", "\\|").replace("\n", " ")


def _table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(str(x) for x in r) + " |" for r in rows]
    return "\n".join(lines)


def _run_state(result: dict[str, Any] | None, paper: papers.Paper) -> str:
    """ok / error / unreadable / stale-schema / stale (declaration changed since the run) / none."""
    if result is None:
        return "none"
    if result.get("evidence_state"):  # committed evidence is dated by its code, not by the declaration
        return "stale" if result["evidence_state"] == "stale" else "ok"
    status = result.get("status")
    if status in BROKEN or status == "error":
        return status
    claims = paper.claims
    recorded = (result.get("claims") or {}).get("digest")
    if claims is not None and recorded and recorded != claims.digest:
        return "stale"
    return "ok"


def _verdict_word(result: dict[str, Any] | None) -> str | None:
    if result is None:
        return None
    if result.get("status") != "ok":
        return result.get("status")
    return result.get("verdict")


def _collect(out: Path) -> list[dict[str, Any]]:
    rows = []
    for p in papers.PAPERS:
        runs = {m: load_result(p.slug, out, m) for m in MODES}
        if runs["full"] is None:  # no local full run: show the committed one (harness.evidence)
            ev = evidence_state(p.slug)
            if ev.record is not None and ev.state != "unreadable":
                runs["full"] = {**ev.record, "evidence_state": ev.state}
                if ev.state in ("ok", "mismatch") and p.claims is not None:
                    # a committed record is judged against today's declaration (as `evidence` does), not the
                    # one it ran under: an expectation set from this very run is not a surprise
                    expect = {spec.id: spec.expect["full"] for spec in p.claims.for_mode("full")}
                    runs["full"]["checks"] = [
                        {**c, "expected": expect.get(c["id"], c["expected"])} for c in ev.record["checks"]
                    ]
        sweeps = {m: s for m in MODES if (s := load_sweep(p.slug, out, m)) is not None}
        rows.append({"paper": p, "runs": runs, "sweeps": sweeps, "bench": load_bench(p.slug, out)})
    return rows


def _surprises(rows: list[dict[str, Any]]) -> list[str]:
    items = []
    for r in rows:
        p = r["paper"]
        for mode, res in r["runs"].items():
            state = _run_state(res, p)
            where = f"`{p.slug}` ({mode})"
            if state == "error":
                first = (res.get("error") or "").strip().splitlines()
                items.append(f"{where}: {_tag('error')}: {first[-1] if first else 'no message'}")
            elif state in BROKEN:
                items.append(f"{where}: record {_tag(state)} ({res.get('error')}); rerun it")
            elif state == "stale":
                items.append(f"{where}: stale: the claims declaration changed after this run; rerun it")
            if state in ("ok", "stale"):
                for c in res.get("checks", []):
                    if c["outcome"] != c["expected"]:
                        items.append(
                            f"{where}: check `{c['id']}` declared {_tag(c['expected'])}, measured "
                            f"{_tag(c['outcome'])} ({_cell(c['measured'])} {c['op']} {_cell(c['threshold'])})"
                        )
        for mode, sweep in r["sweeps"].items():
            if sweep.get("status") in BROKEN:
                items.append(f"`{p.slug}` ({mode} sweep): summary {_tag('unreadable')}")
                continue
            if sweep.get("n_crashed"):
                items.append(
                    f"`{p.slug}` ({mode} sweep): {sweep['n_crashed']} seed(s) crashed: {sweep['crashed']}"
                )
            for c in sweep.get("checks", []):
                if not c["consistent"]:
                    flips = ", ".join(f"seed {s}: {o}" for s, o in c["outcomes"].items())
                    items.append(
                        f"`{p.slug}` ({mode} sweep): check `{c['id']}` declared {_tag(c['expected'])}, per seed {flips}"
                    )
        if r["bench"] and r["bench"].get("status") in BROKEN:
            items.append(f"`{p.slug}` bench.json {_tag('unreadable')}")
    return items


def _status_figure(rows: list[dict[str, Any]], out: Path) -> str | None:
    """Stacked bars: per field, how many papers have each measured quick verdict (or registry status)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover - matplotlib is a core dependency
        return None
    fields = sorted({r["paper"].field for r in rows})
    counts = {f: Counter() for f in fields}
    for r in rows:
        res = r["runs"]["quick"]
        word = _verdict_word(res) if _run_state(res, r["paper"]) in ("ok", "stale", "error") else None
        word = word or r["paper"].status
        counts[r["paper"].field]["error" if word in BROKEN else word] += 1
    order = [k for k in _VERDICT_COLOURS if any(counts[f][k] for f in fields)]
    fig, ax = plt.subplots(figsize=(6.5, 0.22 * len(fields) + 1.0))
    left = [0] * len(fields)
    for key in order:
        vals = [counts[f][key] for f in fields]
        ax.barh(fields, vals, left=left, color=_VERDICT_COLOURS[key], label=key, edgecolor="white")
        left = [a + b for a, b in zip(left, vals)]
    ax.invert_yaxis()
    ax.set_xlabel("papers (quick-mode verdict where measured, else registry status)")
    ax.legend(fontsize=7, ncol=len(order), loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    ax.tick_params(labelsize=8)
    ax.xaxis.get_major_locator().set_params(integer=True)
    path = out / "report-verdicts.png"
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path.name


def _paper_section(r: dict[str, Any], out: Path) -> list[str]:
    p = r["paper"]
    claims = p.claims
    runs = {m: res for m, res in r["runs"].items() if res is not None}
    md = [f'<a id="{p.slug}"></a>', "", f"### {p.title} (`{p.slug}`)", ""]
    md += [f"Tier {p.tier}; status {_tag(p.status)}; code `{p.source_dir}/`.", ""]
    md += [f"**Claim checked** (digest): {p.check}", ""]
    if claims is None:
        return md
    if claims.quick:
        md += [f"**Quick mode:** {claims.quick}", ""]
    if claims.deviations:
        md += ["**Deviations from the digest:**", ""] + [f"- {d}" for d in claims.deviations] + [""]
    by_mode = {
        m: {c["id"]: c for c in res.get("checks", [])}
        for m, res in runs.items()
        if res.get("status") not in BROKEN
    }
    header = ["check", "kind", "condition"]
    for m in MODES:
        header += [f"{m}: declared", f"{m}: measured", f"{m}: outcome"]
    rows = []
    for spec in claims.checks:
        row = [f"`{spec.id}`", spec.kind, spec.condition().replace("|", "\\|")]
        for m in MODES:
            if m not in spec.modes:
                row += ["-", "-", "-"]
                continue
            c = by_mode.get(m, {}).get(spec.id)
            measured = "-" if c is None else _cell(c["measured"])
            if c is not None and c.get("interval"):
                measured += f" [{_cell(c['interval'][0])}, {_cell(c['interval'][1])}]"
            outcome = "not run" if c is None else _tag(c["outcome"])
            if c is not None and c.get("gated_by"):
                outcome += f" ({unmet_preconditions(c)})".replace("|", "\\|")
            row += [_tag(spec.expect[m]), measured, outcome]
        rows.append(row)
    md += [_table(header, rows), ""]
    md += ["*Measured values of per-seed checks show the median and the [min, max] over seeds.*", ""]
    for spec in claims.checks:
        md += [f"- `{spec.id}`: {spec.measures}"]
    md += [""]
    for m, res in runs.items():
        values = {**res.get("params", {}), **res.get("metrics", {})}
        values.update({c["id"]: c["measured"] for c in res.get("checks", [])})
        reasons = [
            f"- `{s.id}` ({m}: declared {_tag(s.expect[m])}): {fill_reason(s.reason, values)}"
            for s in claims.for_mode(m)
            if s.reason
        ]
        if reasons and res.get("status") == "ok":
            md += [f"**Reasons ({m} mode, with this run's values):**", ""] + reasons + [""]
    for m, res in runs.items():
        state = _run_state(res, p)
        head = f"#### {m} mode, seed {res.get('seed')}: {_tag(_verdict_word(res))}"
        if res.get("evidence_state"):
            head += f" (committed evidence, `evidence/{p.slug}/`: {res['evidence_state']})"
        elif state == "stale":
            head += " (stale: declaration changed since)"
        md += [head, ""]
        if state in BROKEN:
            md += [f"Record {state}: `{res.get('path')}` ({res.get('error')}).", ""]
            continue
        run_dir = Path(os.path.relpath(Path(res["path"]).parent, out)) if "path" in res else Path(p.slug)
        if state == "error":
            md += ["```", (res.get("error") or "").strip(), "```", ""]
        if res.get("params"):
            params = ", ".join(f"{k} = {_cell(v)}" for k, v in res["params"].items())
            md += [f"*Parameters:* {params}", ""]
        for t in res.get("tables", []):
            trows = [[_cell(row.get(c)) for c in t["columns"]] for row in t["rows"]]
            cap = f"{t['name']}" + (f": {t['caption']}" if t.get("caption") else "")
            md += [f"*{cap}*", "", _table([c.replace("|", "\\|") for c in t["columns"]], trows), ""]
        for f in res.get("figures", []):
            src = (run_dir / f["path"]).as_posix()
            md += [f"![{f['name']}]({src})", ""]
            if f.get("caption"):
                md += [f"*{f['caption']}*", ""]
        for note in res.get("notes", []):
            md += [f"- {note}"]
        env = res.get("environment", {})
        git = env.get("git") or {}
        commit = (git.get("commit") or "unknown")[:10] + (" (dirty)" if git.get("dirty") else "")
        commit += (
            f" (installed neurips26 {git['version']})" if not git.get("commit") and git.get("version") else ""
        )
        envline = (
            f"commit {commit}; python {env.get('python')}, {env.get('machine')}, "
            f"{(env.get('threads') or {}).get('cpu_count')} cpus, threads requested "
            f"{(env.get('threads') or {}).get('requested')}; {res.get('total_seconds', 0):.1f} s; "
            f"started {res.get('started_at')}"
        )
        md += ["", f"<sub>{_html.escape(envline)}</sub>", ""]
    for m, sweep in r["sweeps"].items():
        if sweep.get("status") in BROKEN:
            continue
        verdicts = ", ".join(f"{n} {v}" for v, n in sweep["verdicts"].items())
        md += [
            f"#### Seed sweep, {m} mode, seeds {sweep['seeds']}: {verdicts}; {sweep['n_crashed']} crashed",
            "",
        ]
        srows = [
            [
                f"`{c['id']}`",
                c["kind"],
                _tag(c["expected"]),
                ", ".join(f"{s}: {_tag(o)}" for s, o in c["outcomes"].items()),
                _cell(c["median"]),
                f"[{_cell(c['min'])}, {_cell(c['max'])}]",
                "yes" if c["consistent"] else _tag("fail"),
            ]
            for c in sweep["checks"]
        ]
        md += [
            _table(
                ["check", "kind", "declared", "outcome per seed", "median", "min-max", "consistent"], srows
            ),
            "",
        ]
    bench = r["bench"]
    if bench and bench.get("rows"):
        cols = list(dict.fromkeys(k for row in bench["rows"] for k in row))
        md += [f"#### Peer benchmark ({bench.get('mode', '')}, {bench.get('written_at', '')})", ""]
        md += [_table(cols, [[_cell(row.get(c)) for c in cols] for row in bench["rows"]]), ""]
    return md


_CSS = """
body{font-family:system-ui,-apple-system,sans-serif;max-width:1100px;margin:1.5em auto;padding:0 1em;
line-height:1.45;color:#222}
table{border-collapse:collapse;margin:.5em 0;display:block;overflow-x:auto;max-width:100%}
td,th{border:1px solid #ccc;padding:2px 7px;font-size:86%;vertical-align:top}
th{background:#f3f3f3}
img{max-width:100%;height:auto}
pre{overflow-x:auto;background:#f7f7f7;padding:.5em;font-size:80%}
code{font-size:90%}
.o-pass{color:#1b5e20;background:#e8f5e9;padding:0 3px;border-radius:3px}
.o-fail{color:#b71c1c;background:#ffebee;padding:0 3px;border-radius:3px}
.o-inc{color:#6d4c00;background:#fff8e1;padding:0 3px;border-radius:3px}
.o-err{color:#fff;background:#6a1b9a;padding:0 3px;border-radius:3px}
"""


def render_html(markdown_text: str, title: str = "neurips26 report") -> str:
    """The report page: the Markdown rendered by markdown-it-py (tables on, inline HTML kept)."""
    from markdown_it import MarkdownIt

    body = MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown_text)
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{_html.escape(title)}</title><style>{_CSS}</style></head><body>\n{body}</body></html>\n"
    )


def build_markdown(out: Path) -> str:
    rows = _collect(out)
    git = git_state()
    commit = (git.get("commit") or "unknown")[:12] + (" (with local changes)" if git.get("dirty") else "")
    commit += (
        f" (installed neurips26 {git['version']})" if not git.get("commit") and git.get("version") else ""
    )
    n_status = Counter(r["paper"].status for r in rows)
    counts = ", ".join(f"{n_status[s]} {s}" for s in papers.STATUSES if n_status[s])
    md = [
        "# neurips26 reproduction report",
        "",
        f"Code at commit `{commit}`; written {datetime.now(UTC).isoformat(timespec='seconds')}. "
        f"{len(rows)} papers (registry status derived from each claims declaration): {counts}.",
        "",
        "## Surprises",
        "",
    ]
    surprises = _surprises(rows)
    md += [f"- {s}" for s in surprises] if surprises else ["None: every stored run matches its declaration."]
    md += [""]
    fig = _status_figure(rows, out)
    if fig:
        md += [f"![verdicts by field]({fig})", ""]
    header = ["slug", "field", "tier", "status", "quick", "full", "claim checks passed (quick)"]
    body = []
    for r in rows:
        p = r["paper"]
        quick = r["runs"]["quick"]
        passed = "-"
        if quick and quick.get("status") == "ok":
            claims_ = [c for c in quick["checks"] if c["kind"] == "claim"]
            passed = f"{sum(c['outcome'] == 'pass' for c in claims_)}/{len(claims_)}"
        anchor = f"[`{p.slug}`](#{p.slug})" if p.claims is not None else f"`{p.slug}`"
        body.append(
            [
                anchor,
                p.field,
                p.tier.replace("|", "/"),
                _tag(p.status),
                _tag(_verdict_word(quick)),
                _tag(_verdict_word(r["runs"]["full"])),
                passed,
            ]
        )
    md += ["## Summary", "", _table(header, body), ""]
    for field in sorted({r["paper"].field for r in rows}):
        built = [r for r in rows if r["paper"].field == field and r["paper"].claims is not None]
        if not built:
            continue
        md += [f"## {field}", ""]
        for r in built:
            md += _paper_section(r, out)
    return "\n".join(md) + "\n"


def write_report(out: str | Path = "results") -> tuple[Path, Path]:
    """Write ``REPORT.md`` and ``report.html`` into ``out`` (atomically) and return their paths."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    text = build_markdown(out)
    md_path = write_text_atomic(out / "REPORT.md", text)
    html_path = write_text_atomic(out / "report.html", render_html(text))
    return md_path, html_path
