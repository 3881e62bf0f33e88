"""The report in a real browser: headless Chromium (Debian's /usr/bin/chromium, which `make
test` installs) driven by playwright opens each report from disk, and the page must render:
a screenshot that is not blank, a diagnosis's headline, fit test and verdicts in the first
screen, the profile figure decoded and visible (none for a single run), the first trace's
decisions visible, the filters working, no console error, and no request leaving the file.

Screenshots are kept under pytest's tmp dir, and copied to $DIAGYM_SCREENSHOTS when set.
Skipped, saying why, only where chromium or playwright is not installed.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from diagym.analysis.report import write_report
from tests.analysis import report_inputs as inputs

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
MIN_STDDEV = 20.0  # grey levels: a blank or one-colour page is far below

sync_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (it is in the dev extra: "
                                  "pip install -e '.[dev]')")
if not CHROMIUM.is_file():
    pytest.skip(f"{CHROMIUM} is missing and could not be installed (make test installs "
                "Debian's chromium with apt-get as root)", allow_module_level=True)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("browser-reports")
    here = Path(".")  # inputs named relative to tmp, as a user in that directory names them
    before = Path.cwd()
    os.chdir(tmp)
    try:
        diagnosis, _ = inputs.diagnosis_dir(here)
        dacs, _ = inputs.dacs_dir(here)
        write_report([inputs.reference_log(here, 40, "cache-2", inputs.HISTORY_ENV)],
                     here / "reference.html")
        write_report([inputs.llm_log(here)], here / "llm.html")
    finally:
        os.chdir(before)
    return {"reference": tmp / "reference.html", "llm": tmp / "llm.html",
            "diagnosis": tmp / diagnosis / "report.html", "dacs": tmp / dacs / "report.html"}


def _keep(shot: Path) -> None:
    target = os.environ.get("DIAGYM_SCREENSHOTS")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(target) / shot.name)


def _check_detail(page: Any, name: str) -> None:
    """The shown episode: its decisions (a reference DACS run logs outcomes only: the row
    says so), its line's counts in words ("1 error", never "1 errors"), and no decision
    naming its failure twice ("dependency \u2014 dependency")."""
    if name == "dacs":
        assert page.locator("#detail .empty").is_visible()
    else:
        first = page.locator("#detail .decision").first
        assert first.is_visible()
        assert "decision 0:" in first.locator("summary").first.inner_text()
    for summary in page.locator("#detail .decision > summary").all_inner_texts():
        outcome, _, cause = summary.partition(" \u2192 ")[2].partition(" \u2014 ")
        assert outcome and cause != outcome, summary
    said = page.locator("#detail p").first.inner_text()
    assert not re.search(r"\b1 (calls|errors)\b", said), said


@pytest.mark.parametrize("name", ["reference", "llm", "diagnosis", "dacs"])
def test_the_report_renders_in_chromium_from_disk(
        name: str, browser: Any, reports: dict[str, Path], tmp_path: Path) -> None:
    from PIL import Image, ImageStat

    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    requests: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    url = reports[name].resolve().as_uri()
    page.goto(url, wait_until="load")
    if name == "diagnosis":  # the page opens with the verdict: seen before any scrolling
        for locator in ("#verdict p.lead", "#verdict dl.facts", "#verdict table"):
            box = page.locator(locator).first.bounding_box()
            assert box is not None and box["y"] + box["height"] <= 1000, locator

    if name in ("reference", "llm"):  # one run each: no single-dot profile, the summary's rate
        assert page.locator("#profile").count() == 0
    else:
        figure = page.locator("#profile img").first
        assert figure.is_visible()
        assert figure.evaluate("img => img.complete && img.naturalWidth > 0")
    rows = page.locator("#episodes tbody tr")
    listed = page.evaluate("JSON.parse(document.getElementById('viewer-data').textContent)"
                           ".listed")
    assert rows.count() == min(25, listed)
    heading = page.locator("#detail h3").first
    heading.scroll_into_view_if_needed()
    assert heading.inner_text().startswith("Episode 0 of ")
    _check_detail(page, name)
    if name in ("reference", "diagnosis"):  # cache-2's first episode fails: its picture
        frame = page.locator("#detail img.frame").first
        frame.scroll_into_view_if_needed()
        assert frame.is_visible()
        assert frame.evaluate("img => img.complete && img.naturalWidth === 640")

    page.select_option("#filter-outcome", "failure")
    outcomes = page.locator("#episodes tbody td.outcome").all_inner_texts()
    assert set(outcomes) <= {"failure"}
    assert len(outcomes) == min(25, page.evaluate(
        "JSON.parse(document.getElementById('viewer-data').textContent).episodes"
        ".filter(r => !r[2] && r[3] >= 0).length"))
    if name == "llm":  # the first failed episode's decisions, the wrong slot attributed
        failed = tmp_path / "report-llm-failure.png"
        page.locator("#traces").screenshot(path=str(failed))
        _keep(failed)
        assert page.locator("#detail .decision.bad").first.is_visible()
    page.select_option("#filter-outcome", "all")

    shot = tmp_path / f"report-{name}.png"
    page.screenshot(path=str(shot), full_page=True)
    _keep(shot)
    grey = Image.open(shot).convert("L")
    assert ImageStat.Stat(grey).stddev[0] > MIN_STDDEV
    page.close()
    assert errors == []
    assert {u.split(":", 1)[0] for u in requests} <= {"file", "data"}, requests
