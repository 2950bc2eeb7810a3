"""The documentation site: every code block runs, the site builds in strict mode, and it reads in a browser.

The code blocks run with `make test`; building the site and opening it in a browser (marked `site`) run with
`make docs`, which `.ci/run` calls.
"""

import functools
import http.server
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from neurips26 import _docs, papers

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs").glob("*.md")) + sorted((ROOT / "docs" / "examples").glob("*.md"))


def _python_blocks(path: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", path.read_text(), flags=re.S | re.M)


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_every_code_block_runs(page, tmp_path, monkeypatch):
    """The Python blocks of a page run in order in one namespace, as a reader would paste them."""
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__docs__"}
    for block in _python_blocks(page):
        exec(compile(block, str(page), "exec"), namespace)  # noqa: S102 - our own documentation


def test_every_example_names_a_paper():
    examples = {p.stem for p in (ROOT / "docs" / "examples").glob("*.md")}
    assert examples <= set(papers.slugs()), sorted(examples - set(papers.slugs()))
    assert all(_python_blocks(ROOT / "docs" / "examples" / f"{e}.md") for e in examples)


def test_generated_sources_cover_every_paper(tmp_path):
    pages = _docs.write_sources(tmp_path / "docs", run_examples=False)
    assert len(pages) == 1 + 2 * len(papers.PAPERS)
    page = (tmp_path / "docs" / "papers" / "srgw-graphon.md").read_text()
    claims = papers.get("srgw-graphon").claims
    assert all(f"`{c.id}`" in page for c in claims.checks)  # every declared check, with its threshold
    assert all(d in page for d in claims.deviations)
    api = (tmp_path / "docs" / "api" / "srgw-graphon.md").read_text()
    assert all(name in api for name in papers.get("srgw-graphon").api)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The built site: NEURIPS26_SITE when `make docs` has just built it, else a strict build in a scratch folder."""
    if built := os.environ.get("NEURIPS26_SITE"):
        return Path(built).resolve()
    if shutil.which("mkdocs", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("mkdocs is not installed (the docs extra)")
    tmp = tmp_path_factory.mktemp("site")
    _docs.write_sources(tmp / "docs")
    config = tmp / "mkdocs.yml"
    text = (ROOT / "mkdocs.yml").read_text()
    text = text.replace("docs_dir: build/docs", f"docs_dir: {tmp / 'docs'}").replace(
        "site_dir: site", f"site_dir: {tmp / 'site'}"
    )
    config.write_text(text.replace("paths: [src]", f"paths: [{ROOT / 'src'}]"))
    done = subprocess.run(
        [str(Path(sys.executable).parent / "mkdocs"), "build", "--strict", "-f", str(config)],
        capture_output=True,
        text=True,
        timeout=600,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return tmp / "site"


@pytest.mark.site
def test_the_site_builds_in_strict_mode_with_a_page_per_paper(site):
    for p in papers.PAPERS:
        assert (site / "papers" / p.slug / "index.html").exists(), p.slug
        assert (site / "api" / p.slug / "index.html").exists(), p.slug
    assert (site / "search" / "search_index.json").exists()


def _chromium():
    for name in ("chromium-headless-shell", "chromium"):
        if path := shutil.which(name):
            return path
    return None


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # the test's output is its own report
        pass


_PAGE_STATE = """() => ({
  article: !!document.querySelector('article'),
  broken: [...document.images].filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src),
  width: document.documentElement.scrollWidth,
})"""


@pytest.mark.site
@pytest.mark.skipif(_chromium() is None, reason="no headless Chromium (tools/system-packages.sh installs it)")
@pytest.mark.parametrize("width", [1400, 390])
def test_the_site_reads_in_a_real_browser(site, width):
    """Every page loads with every image, nothing overflows sideways, and the search finds a paper by its title."""
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed (the docs extra)"
    )
    pages = ["index.html", "conference/index.html", "protocol/index.html"]
    pages += [f"papers/{p.slug}/index.html" for p in papers.PAPERS] + [
        f"api/{p.slug}/index.html" for p in papers.PAPERS
    ]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    problems = []
    try:
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=_chromium(), args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": width, "height": 900})
            for path in pages:
                response = page.goto(base + path, wait_until="load")
                state = page.evaluate(_PAGE_STATE)
                if response is None or response.status != 200 or not state["article"]:
                    problems.append(f"{path}: did not load")
                if state["broken"]:
                    problems.append(f"{path}: images that did not load {state['broken']}")
                if state["width"] > width + 1:
                    problems.append(f"{path}: {state['width']} px wide in a {width} px window")
            title = papers.get("maxsketch").title
            page.goto(base + "index.html?q=" + title.split(":")[0])
            page.wait_for_selector(".md-search-result__item", timeout=60_000)
            found = page.locator(".md-search-result__item").all_inner_texts()
            if not any(title in text for text in found):
                problems.append(f"search for a word of {title!r} found {found[:3]}")
            browser.close()
    finally:
        server.shutdown()
    assert not problems, "\n".join(problems)
