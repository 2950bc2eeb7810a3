"""``results/REPORT.md`` and ``results/report.html``: a summary table, then one section per paper."""

from __future__ import annotations

import html as _html
import json
from pathlib import Path
from typing import Any

from .. import papers
from .runner import load_result


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list) and len(value) == 2 and all(isinstance(v, (int, float)) for v in value):
        return f"[{value[0]:.4g}, {value[1]:.4g}]"
    return str(value)


def _verdict(result: dict[str, Any] | None) -> str:
    if result is None:
        return "-"
    return "error" if result.get("status") == "error" else str(result["verdict"])


def _collect(out: Path) -> list[dict[str, Any]]:
    rows = []
    for p in papers.PAPERS:
        by_mode = {m: load_result(p.slug, out, mode=m) for m in ("quick", "full")}
        sweeps = {}
        for m in ("quick", "full"):
            path = out / p.slug / f"sweep-{m}.json"
            if path.exists():
                sweeps[m] = json.loads(path.read_text())
        rows.append({"paper": p, "quick": by_mode["quick"], "full": by_mode["full"], "sweeps": sweeps})
    return rows


def _sweep_rows(sweep: dict[str, Any]) -> list[list[str]]:
    return [
        [
            c["name"],
            _fmt(c["median"]),
            _fmt(c["min"]),
            _fmt(c["max"]),
            _fmt(c["iqr"]),
            c["op"],
            _fmt(c["threshold"]),
            f"{c['pass_rate']:.0%}",
        ]
        for c in sweep["checks"]
    ]


SWEEP_HEADER = ["check", "median", "min", "max", "IQR", "op", "threshold", "pass rate"]


def _checks_rows(result: dict[str, Any]) -> list[list[str]]:
    return [
        [c["name"], _fmt(c["measured"]), c["op"], _fmt(c["threshold"]), "pass" if c["passed"] else "FAIL"]
        for c in result["checks"]
    ]


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    esc = [[str(x).replace("|", "\\|") for x in r] for r in rows]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(r) + " |" for r in esc]
    return "\n".join(lines)


def _summary(rows: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    header = ["slug", "field", "tier", "status", "quick verdict", "full verdict", "checks passed (latest)"]
    body = []
    for r in rows:
        p = r["paper"]
        latest = r["full"] or r["quick"]
        passed = "-"
        if latest and latest.get("checks"):
            passed = f"{sum(c['passed'] for c in latest['checks'])}/{len(latest['checks'])}"
        body.append([p.slug, p.field, p.tier, p.status, _verdict(r["quick"]), _verdict(r["full"]), passed])
    return header, body


def write_report(out: str | Path = "results") -> tuple[Path, Path]:
    """Write the Markdown and HTML reports into ``out`` and return their paths."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rows = _collect(out)
    header, body = _summary(rows)
    n_status = {s: sum(r["paper"].status == s for r in rows) for s in papers.STATUSES}
    counts = ", ".join(f"{n} {s}" for s, n in n_status.items() if n)

    md = [
        "# neurips26 reproduction report",
        "",
        f"{len(rows)} papers: {counts}.",
        "",
        _md_table(header, body),
        "",
    ]
    sections_html = []
    for r in rows:
        p = r["paper"]
        results = [(m, r[m]) for m in ("quick", "full") if r[m] is not None]
        if not results and not r["sweeps"]:
            continue
        md += [f"## {p.title} (`{p.slug}`)", ""]
        md += [f"*Tier {p.tier}; status **{p.status}**; code `{p.source_dir}/`.*", ""]
        md += [f"**Claim checked** (digest): {p.check}", ""]
        if p.status_note:
            md += [f"**Status note:** {p.status_note}", ""]
        sec = [f"<h2 id='{p.slug}'>{_html.escape(p.title)} (<code>{p.slug}</code>)</h2>"]
        sec.append(
            f"<p><em>Tier {p.tier}; status <b>{p.status}</b>; code <code>{p.source_dir}/</code>.</em></p>"
        )
        sec.append(f"<p><b>Claim checked</b> (digest): {_html.escape(p.check)}</p>")
        if p.status_note:
            sec.append(f"<p><b>Status note:</b> {_html.escape(p.status_note)}</p>")
        for mode, res in results:
            title = f"{mode} mode, seed {res['seed']}: verdict {_verdict(res)} ({res['total_seconds']:.1f} s)"
            md += [f"### {title}", ""]
            sec.append(f"<h3>{_html.escape(title)}</h3>")
            if res.get("status") == "error":
                md += ["```", res.get("error", "").strip(), "```", ""]
                sec.append(f"<pre>{_html.escape(res.get('error', ''))}</pre>")
                continue
            if res["expected_verdict"] != "reproduced":
                line = f"Declared verdict: {res['expected_verdict']}. {res['expected_reason']}"
                md += [f"> {line}", ""]
                sec.append(f"<blockquote>{_html.escape(line)}</blockquote>")
            checks = _checks_rows(res)
            ch_header = ["check", "measured", "op", "threshold", "result"]
            md += [_md_table(ch_header, checks), ""]
            sec.append(_html_table(ch_header, checks))
            for t in res["tables"]:
                trows = [[_fmt(row.get(c)) for c in t["columns"]] for row in t["rows"]]
                cap = f"{t['name']}" + (f": {t['caption']}" if t.get("caption") else "")
                md += [f"*{cap}*", "", _md_table(t["columns"], trows), ""]
                sec.append(f"<p><em>{_html.escape(cap)}</em></p>" + _html_table(t["columns"], trows))
            for f in res["figures"]:
                path = f"{p.slug}/{f['path']}"
                md += [f"![{f['name']}]({path})", ""]
                if f.get("caption"):
                    md += [f"*{f['caption']}*", ""]
                sec.append(
                    f"<figure><img src='{path}' alt='{f['name']}' style='max-width:720px'>"
                    f"<figcaption>{_html.escape(f.get('caption', ''))}</figcaption></figure>"
                )
            for note in res.get("notes", []):
                md += [f"- {note}"]
                sec.append(f"<p>&bull; {_html.escape(note)}</p>")
            env = res.get("environment", {})
            envline = f"python {env.get('python')}, {env.get('machine')}, cpus {env.get('threads', {}).get('cpu_count')}"
            md += ["", f"<sub>{envline}; started {res.get('started_at')}</sub>", ""]
            sec.append(f"<p><small>{_html.escape(envline)}; started {res.get('started_at')}</small></p>")
        for mode, sweep in r["sweeps"].items():
            verdicts = ", ".join(f"{n} {v}" for v, n in sweep["verdicts"].items())
            title = f"Seed sweep, {mode} mode, seeds {sweep['seeds']}: {verdicts}"
            rows_ = _sweep_rows(sweep)
            md += [f"### {title}", "", _md_table(SWEEP_HEADER, rows_), ""]
            sec.append(f"<h3>{_html.escape(title)}</h3>" + _html_table(SWEEP_HEADER, rows_))
        sections_html.append("\n".join(sec))

    md_path = out / "REPORT.md"
    md_path.write_text("\n".join(md) + "\n")
    page = (
        "<!doctype html><html><head><meta charset='utf-8'><title>neurips26 report</title><style>"
        "body{font-family:system-ui,sans-serif;max-width:1000px;margin:2em auto;padding:0 1em}"
        "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 8px;"
        "font-size:90%}th{background:#f3f3f3}blockquote{color:#555;border-left:3px solid #ccc;padding-left:1em}"
        "</style></head><body><h1>neurips26 reproduction report</h1>"
        f"<p>{len(rows)} papers: {_html.escape(counts)}.</p>"
        + _html_table(header, body, link_first=True)
        + "\n".join(sections_html)
        + "</body></html>"
    )
    html_path = out / "report.html"
    html_path.write_text(page)
    return md_path, html_path


def _html_table(header: list[str], rows: list[list[str]], link_first: bool = False) -> str:
    head = "".join(f"<th>{_html.escape(h)}</th>" for h in header)
    body = []
    for r in rows:
        cells = []
        for i, x in enumerate(r):
            text = _html.escape(str(x))
            if link_first and i == 0:
                text = f"<a href='#{text}'>{text}</a>"
            cells.append(f"<td>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"
