"""Render pages of the built documentation site in a headless browser and check their content.

    scripts/build-docs
    .venv-docs/bin/pip install playwright
    .venv-docs/bin/python scripts/check_docs_in_browser.py  # screenshots: docs/_build/screenshots

Opens the landing page, the decision guide, the benchmarks page, the coarse-model page, an API
page and a notebook page in Chromium (Playwright; the browser is ``$CHROMIUM``, else the first
of ``chromium``, ``chromium-browser``, ``google-chrome`` on the path, else Playwright's own; on
Debian ``apt-get install chromium``), checks what a reader sees there (the rendered title, code,
the navigation and that its titles fit on one line, the results and decision tables, the API's
parameter list, the notebook's cells and figures), saves a full-page screenshot of each and
exits non-zero if a check fails.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[1]
PAGES = {
    "landing": "index.html",
    "choosing": "choosing.html",
    "benchmarks": "benchmarks.html",
    "coarse-model": "coarse-model.html",
    "api": "generated/pymc_rnshmc.RNSRMHMC.html",
    "notebook": "notebooks/banana.html",
}
TABLES_AT_THE_TOP = {"landing": 1, "benchmarks": 1, "choosing": 1, "coarse-model": 2}
"""Pages that must show at least this many tables (the results table, the decision tables)."""
HEADER_HEIGHT = 120
"""Pixels the top navigation may take: more means its titles wrap onto several lines."""
QUIET_CHROMIUM = [
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
"""No connections a closed network would refuse at every start."""


def browser_path() -> str | None:
    candidates = [os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"]
    for candidate in filter(None, candidates):
        found = shutil.which(candidate)
        if found:
            return found
    return None


def visible_text(page, selector: str) -> list[str]:
    return [
        element.inner_text()
        for element in page.query_selector_all(selector)
        if element.is_visible()
    ]


def check(page, name: str) -> list[str]:
    """What the page shows, and the problems found."""
    title = " ".join(visible_text(page, "h1"))
    code = len(visible_text(page, "div.highlight pre"))
    navigation = len(visible_text(page, "nav a"))
    images = [img for img in page.query_selector_all("img") if img.is_visible()]
    shown = sum(1 for img in images if page.evaluate("(img) => img.naturalWidth > 0", img))
    print(f"{name}: title {title!r}, {code} code blocks, {navigation} links, {shown} images")
    problems = []
    if not title:
        problems.append(f"{name}: no visible title")
    if navigation < 3:
        problems.append(f"{name}: the navigation is missing")
    if name == "landing" and not ("pymc-rnshmc" in title and code >= 1):
        problems.append("landing: no title or code example")
    if name == "api":
        terms = " ".join(visible_text(page, "dt"))
        if "RNSRMHMC" not in title or "softabs_alpha" not in terms:
            problems.append("api: the class or its parameters are not shown")
    if name == "landing" and shown < 1:
        problems.append("landing: its figure is not shown")
    tables = len(visible_text(page, "article table"))
    if tables < TABLES_AT_THE_TOP.get(name, 0):
        problems.append(f"{name}: {tables} tables shown, {TABLES_AT_THE_TOP[name]} expected")
    header = page.query_selector("header")
    height = header.bounding_box()["height"] if header and header.is_visible() else 0
    print(f"{name}: {tables} tables, header {height:.0f} px high")
    if height > HEADER_HEIGHT:
        problems.append(f"{name}: the top navigation is {height:.0f} px high (titles wrap)")
    if name == "notebook":
        tables = len(visible_text(page, "div.cell_output table"))
        print(f"notebook: {tables} output tables")
        if code < 5:
            problems.append("notebook: its code cells are not shown")
        if shown < 2 or tables < 1:
            problems.append("notebook: its stored outputs (tables, figures) are not shown")
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", type=Path, default=ROOT / "docs/_build/html")
    parser.add_argument("--screenshots", type=Path, default=ROOT / "docs/_build/screenshots")
    args = parser.parse_args()
    args.screenshots.mkdir(parents=True, exist_ok=True)
    problems = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=browser_path(), args=QUIET_CHROMIUM)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        for name, relative in PAGES.items():
            target = args.site / relative
            if not target.exists():
                problems.append(f"{name}: {target} was not built")
                continue
            page.goto(target.as_uri())
            page.wait_for_load_state("load")
            problems += check(page, name)
            page.screenshot(path=str(args.screenshots / f"{name}.png"), full_page=True)
        browser.close()
    for problem in problems:
        print("FAILED", problem)
    print(f"screenshots in {args.screenshots}")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
