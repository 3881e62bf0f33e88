"""A diagnosis page opens with the diagnosis (issue 37 item 6): the headline sentence, then the
fit test (statistic, expected, p, verdict, the configurations outside their band), then each
component's verdict with its evidence and intervals, all before any table of runs, for both env
families; every text from the diagnosis is escaped.

The page is parsed into a tree (html.parser), never grepped: order is document order, and the
cells are compared with the diagnosis JSON the page was built from.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from diagym.analysis.diagnose.honesty import FitTest
from diagym.analysis.report import write_report
from tests.analysis import report_inputs as inputs
from tests.analysis.html_tree import Node, after_heading, rows, tree


def check_opens_with_the_diagnosis(page: Path, diagnosis: dict[str, Any]) -> None:
    root = tree(page)
    nodes = root.walk()
    position = {id(n): i for i, n in enumerate(nodes)}
    main = root.find_all("main")[0]
    sections = [n for n in main.children if isinstance(n, Node) and n.tag == "section"]
    assert sections[0].attrs["id"] == "verdict"
    assert sections[0].find_all("h2")[0].text() == "Diagnosis"

    lead = next(n for n in nodes if n.tag == "p" and "lead" in n.classes)
    assert lead.text() == diagnosis["headline"]
    fit = diagnosis["fit"]
    assert ("fits" if fit["verdict"] == "fits" else "outside") in lead.classes

    dl = after_heading(root, "Fit test", "dl")
    facts = dict(zip([n.text() for n in dl.find_all("dt")], [n.text() for n in dl.find_all("dd")],
                     strict=True))
    test = FitTest.from_json(fit)
    assert facts["hypothesis"] == fit["hypothesis"]
    assert facts["statistic"].startswith(f"{fit['statistic']:.1f} (")
    assert facts["expected"].startswith(f"{fit['expected_statistic']:.1f} (the median of "
                                        f"{fit['replicates']} replicates")
    assert facts["p"] == test.p_text()
    assert facts["verdict"] == fit["verdict"]
    assert facts["outside their 95% band"] == (", ".join(fit["outside"]) or "none")

    table = after_heading(root, "Components", "table")
    shown = {}
    for cells in rows(table):
        component, finding, evidence, intervals = cells
        clauses = [li.text() for li in evidence.find_all("li")]
        shown[component.text()] = ("; ".join([finding.text(), *clauses]),
                                   [li.text() for li in intervals.find_all("li")])
    assert sorted(shown) == sorted(diagnosis["verdicts"])
    for component, sentence in diagnosis["verdicts"].items():
        rebuilt, intervals = shown[component]
        assert f"{component}: {rebuilt}" == sentence  # every word of the verdict, in order
        assert all(i in sentence for i in intervals)
        assert len(intervals) == sentence.count("interval ")

    # in that order, and before any table of runs
    runs = next(n for n in nodes if n.tag == "h3" and n.text().startswith("Summary of "))
    assert position[id(lead)] < position[id(dl)] < position[id(table)] < position[id(runs)]
    provenance = next(n for n in nodes if n.tag == "section" and n.attrs.get("id") ==
                      "provenance")
    assert position[id(table)] < position[id(provenance)]


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    tmp = tmp_path_factory.mktemp("verdict-inputs")
    return {"workflow": inputs.diagnosis_dir(tmp), "dacs": inputs.dacs_diagnosis_dir(tmp)}


@pytest.mark.parametrize("family", ["workflow", "dacs"])
def test_a_diagnosis_page_opens_with_headline_fit_test_and_components(
        made: dict[str, tuple[Path, Path]], family: str, tmp_path: Path) -> None:
    out, log = made[family]
    diagnosis = json.loads((out / "diagnosis.json").read_text())
    assert diagnosis["fit"] is not None and diagnosis["verdicts"]
    page = out / "report.html"  # the page diagnose --out --log wrote beside its outputs
    check_opens_with_the_diagnosis(page, diagnosis)
    assert "Summary of" in page.read_text()  # the log's runs are on it, in both families


def test_a_rejected_fit_is_marked_and_text_from_the_diagnosis_is_escaped(
        made: dict[str, tuple[Path, Path]], tmp_path: Path) -> None:
    out, log = made["workflow"]
    diagnosis = json.loads((out / "diagnosis.json").read_text())
    hostile = "</p><script>alert(1)</script><img src=x onerror=alert(2)>"
    diagnosis["headline"] = f"outside the family: {hostile}"
    diagnosis["fit"] = {**diagnosis["fit"], "verdict": "outside the family",
                        "p_value": 0.00498, "outside": [hostile]}
    component = next(iter(diagnosis["verdicts"]))
    diagnosis["verdicts"][component] = f"{component}: if it were x (it fits badly): {hostile}; " \
                                       "a (b; c) clause; epsilon 0 (interval 0..0.1)"
    folder = tmp_path / "hostile"
    folder.mkdir()
    (folder / "diagnosis.json").write_text(json.dumps(diagnosis))
    page = tmp_path / "hostile.html"
    write_report([folder, log], page)
    root = tree(page)
    scripts = root.find_all("script")
    assert all(s.attrs.get("id") == "viewer-data" or "alert" not in s.text() for s in scripts)
    assert not [n for n in root.find_all("img") if "onerror" in n.attrs]
    check_opens_with_the_diagnosis(page, diagnosis)
    lead = next(n for n in root.walk() if n.tag == "p" and "lead" in n.classes)
    assert "outside" in lead.classes and hostile in lead.text()


@given(st.lists(st.sampled_from(["a", " ", ";", "; ", "(", ")", "[", "]", "x; y"]),
                max_size=12).map("".join))
def test_clauses_split_at_top_level_and_join_back(text: str) -> None:
    from diagym.analysis.report.verdict import top_level_clauses

    parts = top_level_clauses(text)
    assert "; ".join(parts) == text  # nothing lost or added
    cut = 0
    for part in parts[:-1]:  # every cut is outside parentheses and brackets
        cut += len(part)
        depth = 0
        for char in text[:cut]:
            depth = depth + 1 if char in "([" else max(0, depth - 1) if char in ")]" else depth
        assert depth == 0
        cut += 2


def test_a_verdict_splits_at_its_top_level_clauses_only() -> None:
    from diagym.analysis.report.verdict import top_level_clauses

    assert top_level_clauses("(a; b); c [d; e]; f") == ["(a; b)", "c [d; e]", "f"]


def test_an_interval_is_shown_with_what_it_bounds() -> None:
    from diagym.analysis.report.verdict import component_row

    sentence = ("selection: too little evidence for a claim (15 episodes with an env outcome, 18 "
                "failed calls); the best fit reads: scans only the first 2 slots, then guesses "
                "among the rest (scan-s MLE 2, interval 2..2); no lapse found (epsilon 0, "
                "interval 0..0.04); scan-2 beats scan-3 by log-LR 7.7")
    _, finding, evidence, intervals = component_row("selection", sentence)
    assert finding == "too little evidence for a claim (15 episodes with an env outcome, 18 " \
                      "failed calls)"
    assert evidence.items[-1] == "scan-2 beats scan-3 by log-LR 7.7"
    assert intervals.items == ("scans only the first 2 slots, then guesses among the rest "
                               "(scan-s MLE 2, interval 2..2)",
                               "no lapse found (epsilon 0, interval 0..0.04)")
    ranking = ("ranking: dacs-reader (plays as flat-reader) fits best, lapse epsilon 0 (interval "
               "0..0.0063); copy rate 0 (interval 0..0.0112, log-LR 0.0 over none) over 262")
    assert component_row("ranking", ranking)[3].items == (
        "dacs-reader (plays as flat-reader) fits best, lapse epsilon 0 (interval 0..0.0063)",
        "copy rate 0 (interval 0..0.0112, log-LR 0.0 over none)")
