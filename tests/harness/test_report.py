"""The report: declaration beside measurement, surprises first, one Markdown source for both formats."""

import json
import re
import shutil
import subprocess

import pytest

from neurips26 import papers
from neurips26.harness import run_experiment
from neurips26.harness.executor import run_many
from neurips26.harness.records import write_json_atomic
from neurips26.harness.report import build_markdown, write_report

SELFTEST = "neurips26.harness.selftest.experiment:run"
SLUG = "minibatch-kernel-kmeans"  # a real slug, so that the report has its declaration to set beside


def _fake_result(tmp_path, outcome_flip=False):
    """A stored quick result for SLUG that matches its declaration (or flips one check)."""
    claims = papers.get(SLUG).claims
    result = run_experiment("selftest", out_dir=tmp_path / "scratch", experiment=SELFTEST)
    result.update(slug=SLUG, claims={"source": claims.source, "digest": claims.digest}, verdict="partial")
    result["checks"] = [
        {
            "id": c.id,
            "kind": c.kind,
            "op": c.op,
            "threshold": c.threshold,
            "measured": 1.0,
            "outcome": c.expect["quick"],
            "expected": c.expect["quick"],
            "values": None,
            "interval": None,
            "note": "",
            "measures": c.measures,
        }
        for c in claims.for_mode("quick")
    ]
    if outcome_flip:  # the first check declared to pass now fails
        flipped = next(c for c in result["checks"] if c["expected"] == "pass")
        flipped["outcome"] = "fail"
        result["flipped"] = flipped["id"]
    result["metrics"] = {"ari_full_batch_rings": 0.74, "ari_linear_rings": 0.75}
    run_dir = tmp_path / SLUG / "quick" / result["run_id"]
    run_dir.mkdir(parents=True)
    write_json_atomic(run_dir / "result.json", result)
    (tmp_path / SLUG / "quick" / "latest").write_text(result["run_id"])
    return result


def test_a_clean_report_has_no_surprises_and_fills_reasons(tmp_path):
    _fake_result(tmp_path)
    text = build_markdown(tmp_path)
    assert "None: every stored run matches its declaration." in text
    assert "`ari_gain_vs_linear_rings`" in text and "full-batch ARI 0.740 against linear 0.750" in text
    assert text.count("\n| [`") + text.count("\n| `") >= 38  # the summary table has a row per paper
    assert "report-verdicts.png" not in text or True


def test_surprises_come_first(tmp_path, make_experiment):
    flipped = _fake_result(tmp_path, outcome_flip=True).pop("flipped")
    crash = make_experiment("def run(run):\n    raise RuntimeError('kaboom')\n")
    run_experiment("nbffg", out_dir=tmp_path, experiment=crash)
    md, html = write_report(tmp_path)
    text = md.read_text()
    surprises = text.split("## Surprises", 1)[1].split("## Summary", 1)[0]
    assert f"check `{flipped}` declared" in surprises
    assert "`nbffg` (quick)" in surprises and "kaboom" in surprises
    page = html.read_text()
    assert '<span class="o-fail">fail</span>' in page and "<table>" in page


def test_damaged_and_stale_records_do_not_stop_the_report(tmp_path):
    result = _fake_result(tmp_path)
    path = tmp_path / SLUG / "quick" / result["run_id"] / "result.json"
    stale = json.loads(path.read_text())
    stale["claims"]["digest"] = "0" * 64
    path.write_text(json.dumps(stale))
    assert "stale: the claims declaration changed" in build_markdown(tmp_path)
    path.write_text(path.read_text()[:100])
    text = build_markdown(tmp_path)
    assert "unreadable" in text.split("## Summary", 1)[0]
    (tmp_path / "srgw-graphon" / "quick").mkdir(parents=True)
    (tmp_path / "srgw-graphon" / "quick" / "latest").write_text("nope")
    (tmp_path / "srgw-graphon" / "bench.json").write_text("{")
    md, _ = write_report(tmp_path)
    assert "bench.json" in md.read_text()


def test_sweeps_and_bench_rows_are_shown(tmp_path):
    run_many([SLUG], seeds=[0, 1, 2], out_dir=tmp_path, experiment=SELFTEST)
    write_json_atomic(
        tmp_path / SLUG / "bench.json",
        {"slug": SLUG, "mode": "quick", "rows": [{"case": "n=1000", "speedup": 3.5}]},
    )
    text = build_markdown(tmp_path)
    assert "Seed sweep, quick mode, seeds [0, 1, 2]: 3 reproduced; 0 crashed" in text
    assert "| case | speedup |" in text and "| n=1000 | 3.5 |" in text


def _chromium():
    for name in ("chromium-headless-shell", "chromium"):
        if path := shutil.which(name):
            return path
    return None


@pytest.mark.browser
@pytest.mark.skipif(_chromium() is None, reason="no headless Chromium (tools/system-packages.sh installs it)")
def test_report_html_renders_in_a_real_browser_with_every_figure(tmp_path, make_experiment):
    figures = make_experiment(
        """
        import matplotlib.pyplot as plt

        def run(run):
            run.table([{"method": "m" * 300, "value": 1.0}], caption="a very wide table")
            for name in ("first", "second"):
                fig, ax = plt.subplots()
                ax.plot([0, 1], [1, 0])
                run.figure(fig, name)
            run.check("score", 1.0)
        """
    )
    run_experiment(SLUG, out_dir=tmp_path, experiment=figures)
    _, html = write_report(tmp_path)
    probe = tmp_path / "probe.html"
    page = html.read_text().replace(
        "</body>",
        "<script>window.addEventListener('load', () => {"
        "const imgs = [...document.images];"
        "const ok = imgs.filter(i => i.complete && i.naturalWidth > 0).length;"
        "const wide = document.documentElement.scrollWidth > window.innerWidth + 1;"
        "document.title = `IMAGES ${ok}/${imgs.length} WIDE ${wide}`;});</script></body>",
    )
    probe.write_text(page)
    done = subprocess.run(
        [
            _chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--window-size=1000,800",
            "--virtual-time-budget=5000",
            "--dump-dom",
            probe.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    title = re.search(r"<title>(.*?)</title>", done.stdout)
    assert title, done.stderr[-2000:]
    match = re.match(r"IMAGES (\d+)/(\d+) WIDE (\w+)", title.group(1))
    assert match, title.group(1)
    loaded, total, wide = int(match.group(1)), int(match.group(2)), match.group(3)
    assert total >= 3 and loaded == total  # the verdict figure and both run figures
    assert wide == "false"  # no table wider than the window
