"""The report reads in one screen, on the shape of a real one: the compare demo's 16 models with its numbers
(perplexity bounds up to 1e32) and the shipped spec's reduced settings (``report_folder.comparison_folder``).

``report.md`` is under 40 kB with the headline table in its first 40 lines, numbers readable and marked, no
HTML entity; ``report.html``, rendered by a real headless browser (Debian's Chromium driven by Playwright; CI
installs both: ``slurm/install-deps.sh``, the ``dev`` extra), shows the whole headline table at 1400x900
without scrolling, loads its figures, logs no console error and folds every section below the first screen.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from report_folder import NOT_CONVERGED, comparison_folder

from analysis import report

MAX_BYTES, MAX_LINES = 40_000, 40
VIEWPORT = {"width": 1400, "height": 900}


def chromium() -> str | None:
    """The Chromium to drive: ``SYNBENCH_CHROMIUM``, else the first on PATH (Debian's package: ``chromium``)."""
    names = ("chromium", "chromium-browser", "google-chrome")
    return os.environ.get("SYNBENCH_CHROMIUM") or next((p for n in names if (p := shutil.which(n))), None)


@pytest.fixture(scope="module")
def compare_report(tmp_path_factory) -> tuple[Path, Path]:
    folder = comparison_folder(tmp_path_factory.mktemp("compare"))
    return report.write_report(folder, folder.parent)


def test_the_markdown_is_short_and_opens_with_the_headline_table(compare_report) -> None:
    md = compare_report[0].read_text()
    assert len(md.encode()) < MAX_BYTES
    lines = md.splitlines()
    start = lines.index(next(line for line in lines if line.startswith("| model |")))
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))
    assert end <= MAX_LINES and end - start == 2 + 16  # header, rule, a row per model: all in the first 40 lines
    rows = {line.split(" | ")[0][2:]: line for line in lines[start + 2:end]}
    assert lines[start].startswith("| model | perplexity (test) | perplexity (test) on gold-tree | SG score (%) |")
    # numbers for reading, marked: the loose bound, a bound, a model that did not converge
    assert rows["tg"].startswith("| tg | 4.72e+32 ± 8e+31‡ [")
    assert rows["txl-trees"].startswith("| txl-trees | 4.63e+32 ± 2.6e+31† [")
    assert rows["dtg"].startswith("| dtg | 5.12e+06 ± 2.9e+05† [") and rows["dsom"].startswith("| dsom | 4737.00 ± ")
    assert f"| {NOT_CONVERGED} ✗ | " in md
    assert "‡ an upper bound more than 2 times the same model's perplexity with the gold trees" in md
    assert "✗ the model did not converge" in md
    assert not re.search(r"\d{10}", md)  # no number printed in full past 1e9
    assert "| 22.58 ± " in rows["base-lm"]  # SG and BLiMP in percent
    # then the claims' verdicts, as written (no HTML entities), then the rest below
    assert "| dtg | dtg < dtg-eager | perplexity (test) | 14.9 vs 15.5 |" in md
    assert not re.search(r"&(lt|gt|amp|quot|#\d+);", md)
    assert md.index("## The papers' claims: verdicts") < md.index("## Key figures") < md.index("## Setup")


def test_the_html_shows_the_headline_table_on_the_first_screen_of_a_real_browser(compare_report) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (the dev extra) is not installed")
    executable = chromium()
    if executable is None:
        pytest.skip("no Chromium: apt-get install chromium (slurm/install-deps.sh), or set SYNBENCH_CHROMIUM")
    errors: list[str] = []
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport=VIEWPORT)
            page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.on("requestfailed", lambda request: errors.append(f"not loaded: {request.url}"))
            page.goto(compare_report[1].as_uri(), wait_until="load")
            assert page.locator("h1").inner_text() == "synbench report: reproduce-compare-demo"
            table = page.locator("table.compact").first
            assert table.locator("tbody tr").count() == 16
            box = table.bounding_box()
            assert page.evaluate("window.scrollY") == 0 and box is not None and box["x"] >= 0 and box["y"] >= 0
            assert box["x"] + box["width"] <= VIEWPORT["width"] and box["y"] + box["height"] <= VIEWPORT["height"]
            assert page.evaluate("[...document.images].length") == 2  # the key figures, loaded
            assert page.evaluate("[...document.images].every(i => i.complete && i.naturalWidth > 0)")
            # below the first screen: every section folded, and one opens on a click
            assert page.locator("details").count() >= 8 and page.locator("details[open]").count() == 0
            welch = page.locator("details", has=page.locator("summary", has_text="Welch"))
            assert not welch.locator("table").is_visible()
            welch.locator("summary").click()
            assert welch.locator("table").is_visible()
        finally:
            browser.close()
    assert errors == []
