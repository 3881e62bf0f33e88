"""`diagym report` on outputs the real commands wrote: the HTML parses strictly, carries the
provenance and every episode, agrees with the log it was built from, and stays within its
stated bounds; a report that cannot be built never fails the command that asked for it.

(tests/analysis/test_report.py tests the reproduction study's tables; this file tests the
HTML report of analysis/report.)
"""

from __future__ import annotations

import base64
import json
import re
import struct
import zlib
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
from hypothesis import given
from hypothesis import strategies as st

from diagym.analysis import report as report_package
from diagym.analysis.cli.main import main
from diagym.analysis.diagnose.attribution import COUNT_KEYS
from diagym.analysis.report import episodes as viewer_episodes
from diagym.analysis.report import write_report
from diagym.analysis.report.episodes import PROMPT_BYTES, REPLY_BYTES, clip
from diagym.analysis.summary import summarise
from diagym.controllers.policy import EpisodeRecord
from diagym.controllers.provenance import provenance
from diagym.controllers.runlog import call_totals
from diagym.controllers.workflow.adapter import ReferencePolicy
from tests.analysis import report_inputs as inputs
from tests.analysis.html_tree import after_heading, rows, tree
from tests.analysis.test_report_verdict import check_opens_with_the_diagnosis

VOID = {"meta", "img", "br", "hr", "input", "link"}
TEN_THOUSAND_BOUND = 1_500_000  # bytes: docs/REPORT.md's bound for a 10,000-episode run log


class StrictParser(HTMLParser):
    """Fails on an end tag that does not close the innermost open element, and records what
    would reach the network."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.external: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("src", "href") and value and not value.startswith(("data:", "#")):
                self.external.append(value)
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes {self.stack[-1:]}"
        self.stack.pop()


def parse(text: str) -> StrictParser:
    parser = StrictParser()
    parser.feed(text)
    parser.close()
    assert parser.stack == [], f"unclosed elements: {parser.stack}"
    assert parser.external == [], f"references outside the file: {parser.external}"
    assert text.startswith("<!DOCTYPE html>")
    return parser


def viewer(text: str) -> dict[str, Any]:
    blob = re.search(r'<script type="application/json" id="viewer-data">(.*?)</script>', text,
                     re.S)
    assert blob is not None
    return json.loads(blob.group(1))


def log_lines(log: Path, kind: str) -> list[dict[str, Any]]:
    return [e for e in map(json.loads, log.read_text().splitlines()) if e["type"] == kind]


def report_of(tmp: Path, *paths: Path) -> str:
    out = tmp / "report.html"
    written = write_report(list(paths), out)
    text = out.read_text(encoding="utf-8")
    assert written.bytes == len(text.encode("utf-8"))
    assert f"this file is {written.bytes:,} bytes" in text
    parse(text)
    return text


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("report-inputs")
    return {"tmp": tmp, "reference": inputs.reference_log(tmp, 40, "cache-2",
                                                                 inputs.HISTORY_ENV),
            "llm": inputs.llm_log(tmp), "oracle": inputs.oracle_log(tmp),
            "diagnosis": inputs.diagnosis_dir(tmp), "dacs": inputs.dacs_dir(tmp)}


def test_a_reference_run_report_carries_provenance_the_summary_and_every_episode(
        made: dict[str, Any], tmp_path: Path) -> None:
    log = made["reference"]
    text = report_of(tmp_path, log)
    sessions = log_lines(log, "session")
    records = [EpisodeRecord(**e["record"]) for e in log_lines(log, "episode")]
    assert provenance()["git_commit"] in text
    assert sessions[0]["run_id"] in text and inputs.HISTORY_ENV in text
    summary = summarise(records)
    low, high = summary.success_ci
    assert f"{100 * summary.success:.2f}%" in text
    assert f"[{100 * low:.2f}, {100 * high:.2f}]" in text
    data = viewer(text)
    assert data["total"] == data["listed"] == len(records) == 40
    # every row is its episode line: seed, outcome, first failure, work
    rows = [(r[1], bool(r[2]), None if r[3] < 0 else data["failures"][r[3]], r[4], r[5], r[6])
            for r in data["episodes"]]
    assert rows == [(r.task_seed, r.success, r.first_failure, r.completed, r.calls, r.errors)
                    for r in records]
    assert Counter(row[2] for row in rows if row[2]) == Counter(summary.failures)


def test_a_reference_controller_replayed_shows_the_logged_outcome_step_by_step(
        made: dict[str, Any], tmp_path: Path) -> None:
    """The log holds outcomes only; the detailed episodes are the controller played again,
    and each must match its logged record call by call (positive control: the per-step
    controller, played here independently, chooses the same actions)."""
    log = made["reference"]
    data = viewer(report_of(tmp_path, log))
    records = [EpisodeRecord(**e["record"]) for e in log_lines(log, "episode")]
    env = gym.make(inputs.HISTORY_ENV)
    failed = 0
    for row in data["episodes"]:
        detail = data["details"][row[7]]
        record = records[data["episodes"].index(row)]
        steps = detail["decisions"]
        assert "played again" in detail["note"]
        assert len(steps) == record.calls
        assert sum(s["outcome"] == "ok" for s in steps) == record.completed
        player = ReferencePolicy.for_env("cache-2", env)
        player.reset(seed=record.task_seed)
        observation, info = env.reset(seed=record.task_seed)
        for step in steps:
            action = player.act(observation, info)
            assert step["action"] == f"execute(v={int(action[0])}, a={int(action[1])})"
            observation, _, _, _, info = env.step(action)
        failed += record.first_failure is not None
        if record.first_failure == "candidate":
            assert steps[-1]["attribution"].split(" ")[0] in COUNT_KEYS
    assert failed > 0  # cache-2 fails some episodes: the failure rows were exercised
    pictured = [d for d in data["details"] if d["frame"] is not None]
    assert len(pictured) == min(failed, viewer_episodes.FRAMES)
    for detail in pictured:  # drawn at the first failed call, as a 640 x 400 PNG
        steps = detail["decisions"]
        assert steps[detail["frame"]["decision"]]["outcome"] != "ok"
        assert all(s["outcome"] == "ok" for s in steps[:detail["frame"]["decision"]])
        png = base64.b64decode(detail["frame"]["png"])
        assert png.startswith(b"\x89PNG") and png[16:24] == (640).to_bytes(4, "big") + \
            (400).to_bytes(4, "big")


def test_an_llm_run_report_shows_every_call_with_prompt_reply_outcome_and_cost(
        made: dict[str, Any], tmp_path: Path) -> None:
    log = made["llm"]
    text = report_of(tmp_path, log)
    data = viewer(text)
    calls = log_lines(log, "call")
    by_key: dict[str, list[dict[str, Any]]] = {}
    for call in calls:
        by_key.setdefault(call["episode_key"], []).append(call)
    wrong = 0
    for detail in data["details"]:
        mine = sorted(by_key[detail["key"]], key=lambda c: c["decision"])
        assert [s["reply"] for s in detail["decisions"]] == \
            [clip(c["response"], REPLY_BYTES) for c in mine]
        for step in detail["decisions"]:
            assert "Task (op v" in step["prompt"]
            assert len(step["prompt"].encode()) <= PROMPT_BYTES + 40
            assert step["obs"].startswith("registers:")
            if step["outcome"] == "candidate":
                wrong += 1
                assert step["attribution"].split(" ")[0] in COUNT_KEYS
    assert wrong > 0  # the fake model's wrong slots are shown as failed decisions
    totals = call_totals(log)
    assert f"<td class=\"num\">{totals.calls}</td>" in text
    assert f"{totals.totals['cost_usd']:.4f}" in text
    assert "Cost and latency" in text


def test_a_text_oracle_run_plays_through_the_chat_pipeline_and_every_decision_succeeds(
        made: dict[str, Any], tmp_path: Path) -> None:
    data = viewer(report_of(tmp_path, made["oracle"]))
    assert data["total"] == 3
    steps = [s for d in data["details"] for s in d["decisions"]]
    assert len(steps) == 24 and {s["outcome"] for s in steps} == {"ok"}
    assert all(s["prompt"] and s["reply"].startswith("{") for s in steps)


def test_diagnose_out_writes_a_report_beside_with_verdicts_bands_and_traces(
        made: dict[str, Any]) -> None:
    out, log = made["diagnosis"]
    text = (out / "report.html").read_text(encoding="utf-8")
    parse(text)
    diagnosis = json.loads((out / "diagnosis.json").read_text())
    check_opens_with_the_diagnosis(out / "report.html", diagnosis)  # every verdict, first
    assert diagnosis["mechanisms"][0]["name"] in text
    assert text.count("data:image/png;base64,") >= 2  # the bands PNG and the log's profile
    data = viewer(text)
    assert data["total"] == diagnosis["episodes"] == len(log_lines(log, "episode"))
    traced = [s for d in data["details"] for s in d["decisions"]]
    assert traced and all(s["action"].startswith("execute(") for s in traced)
    tally = Counter(s["attribution"].split(" ")[0] for s in traced if s["outcome"] != "ok")
    assert set(tally) <= set(COUNT_KEYS)
    table = after_heading(tree(out / "report.html"), "Attribution, most frequent first", "table")
    shown = [(cells[0].text(), int(cells[1].text())) for cells in rows(table)]
    assert sorted(shown, key=lambda row: -row[1]) == shown  # by count, not alphabetically
    assert dict(shown) == diagnosis["attribution"]


def test_a_dacs_study_report_has_the_accuracy_headline_and_every_episode(
        made: dict[str, Any]) -> None:
    out, log = made["dacs"]
    text = (out / "report.html").read_text(encoding="utf-8")
    parse(text)
    assert "accuracy Wilson 95%" in text and "dacs_agents.png" in text
    assert viewer(text)["total"] == len(log_lines(log, "episode"))


def test_reproduce_writes_a_report_beside_its_tables_and_plots(tmp_path: Path) -> None:
    out = tmp_path / "repro"
    inputs.run_cli("reproduce", "--grid", "selection", "--out", str(out))
    text = (out / "report.html").read_text(encoding="utf-8")
    parse(text)
    assert "Table 6. Selection ablation" in text
    assert text.count("data:image/png;base64,") == len(list(out.glob("*.png")))
    # the figures before the study's tables: reproduce --grid all's Table 4 has 176 rows
    assert text.index("data:image/png;base64,") < text.index("Table 6. Selection ablation")
    # each figure headed by what it shows (its PNG's title), its file name under it
    page = tree(out / "report.html")
    figure = after_heading(page, "Table C.6, candidate selection and resource controls: "
                                 "success per condition and controller", "figure")
    assert figure.find_all("figcaption")[0].text() == "profile_selection.png"
    assert "results.csv" in text and "the first" not in text  # 36 rows: none cut
    # a study logs no episodes, and its settings read one a line, not as a JSON object
    assert "0 logged episodes" not in text and '{"command"' not in text
    facts = [(dt.text(), dd.text()) for dl in tree(out / "report.html").find_all("dl")
             for dt, dd in zip(dl.find_all("dt"), dl.find_all("dd"), strict=True)]
    assert ("grids", "selection") in facts and ("seeds per configuration", "256") in facts


def test_llm_study_out_writes_a_report_beside_with_its_log_and_every_cell(
        tmp_path: Path) -> None:
    out, log = tmp_path / "study", tmp_path / "study.jsonl"
    inputs.run_cli("llm-study", "--policy", "text-oracle", "--design", "fractional",
                   "--seeds", "1", "--out", str(out), "--log", str(log))
    text = (out / "report.html").read_text(encoding="utf-8")
    parse(text)
    cells = {e["run_id"] for e in log_lines(log, "session")}
    data = viewer(text)
    assert data["total"] == len(log_lines(log, "episode")) == len(cells) == 8
    assert len(data["runs"]) == len(cells)
    assert "results.csv" in text and "Cost and latency" in text


def test_a_ten_thousand_episode_log_stays_under_its_bound_and_lists_every_episode(
        tmp_path: Path) -> None:
    log = inputs.reference_log(tmp_path, 10_000, "exact")
    out = tmp_path / "big.html"
    written = write_report([log], out)
    assert written.bytes < TEN_THOUSAND_BOUND, written.bytes
    data = viewer(out.read_text(encoding="utf-8"))
    assert data["total"] == data["listed"] == 10_000
    assert len(data["details"]) == viewer_episodes.DETAILED_EPISODES
    assert any("decisions are kept for the first 300 episodes" in n for n in data["notes"])


def test_listed_episodes_are_capped_and_the_cut_is_stated(
        made: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(viewer_episodes, "LISTED_EPISODES", 10)
    text = report_of(tmp_path, made["reference"])
    assert viewer(text)["listed"] == 10
    assert "the first 10 of 40 episodes are listed" in text


@given(st.text(max_size=3000), st.integers(min_value=30, max_value=2000))
def test_clip_keeps_short_text_and_states_the_cut_of_long_text(text: str, limit: int) -> None:
    clipped = clip(text, limit)
    size = len(text.encode("utf-8"))
    if size <= limit:
        assert clipped == text
    else:
        cut = re.search(r"\[\.\.\. ([\d,]+) bytes cut \.\.\.\]", clipped)
        assert cut is not None and int(cut.group(1).replace(",", "")) == size - limit
        assert len(clipped.encode("utf-8")) <= limit + len(cut.group(0)) + 2


def test_text_from_a_log_is_escaped_never_markup(tmp_path: Path) -> None:
    hostile = '</script><img src=x onerror="alert(1)">'
    log = tmp_path / "hostile.jsonl"
    inputs.run_cli("run", "--env", inputs.ENV, "--policy", "exact", "--episodes", "2",
                   "--log", str(log), "--run-name", hostile)
    text = report_of(tmp_path, log)
    assert hostile not in text and "onerror=\"alert" not in text
    assert viewer(text)["runs"] == [hostile]


def test_a_report_that_cannot_be_built_warns_and_the_command_still_succeeds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(report_package, "write_report", broken)
    out = tmp_path / "diag"
    assert main(["diagnose", "--policy", "exact", "--budget", "12", "--out", str(out)]) == 0
    assert (out / "diagnosis.json").is_file() and not (out / "report.html").exists()
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert warnings == ["diagym diagnose: warning: no report.html (RuntimeError: boom)"]


def test_run_with_a_log_says_how_to_make_its_report(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "a.jsonl"
    assert main(["run", "--env", inputs.ENV, "--policy", "exact", "--episodes", "3",
                 "--log", str(log)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"report: diagym report {log} --out report.html makes one HTML page of this run")


def test_the_report_command_writes_the_file_and_names_it(
        made: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.html"
    out_dir, log = made["diagnosis"]
    assert main(["report", str(out_dir), str(log), "--out", str(out)]) == 0
    printed = capsys.readouterr().out.strip()
    assert printed == f"report: {out} ({out.stat().st_size:,} bytes, 32 episodes)"


@pytest.mark.parametrize(("make", "message"), [
    (lambda d: d / "missing.jsonl", "INPUT {p}: no such file or directory"),
    (lambda d: (d / "notes.txt").write_text("x") and d / "notes.txt",
     "INPUT {p}: not a run log (.jsonl), a study directory or a diagnosis JSON (.json)"),
    (lambda d: (d / "empty").mkdir() or d / "empty",
     "INPUT {p}: an empty directory (no study outputs)"),
    (lambda d: (d / "bad.jsonl").write_text("not json\n") and d / "bad.jsonl",
     "{p}: not a run log (no JSONL line with a \"type\")"),
])
def test_bad_inputs_get_one_line_and_exit_2(
        make: Any, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = make(tmp_path)
    assert main(["report", str(path), "--out", str(tmp_path / "r.html")]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"diagym report: error: {message.format(p=path)}\n"
    assert not (tmp_path / "r.html").exists()


def test_a_study_folder_with_another_commands_jsonl_still_gets_its_page(tmp_path: Path) -> None:
    """A folder holding another program's JSONL (lines with "kind", not "type") beside its
    tables: the folder's page is written, says that file is not read, and that file named as
    an input alone is still refused."""
    folder = tmp_path / "study"
    folder.mkdir()
    (folder / "table.csv").write_text("a,b\n1,2\n")
    (folder / "calls.jsonl").write_text('{"kind": "agent", "text": "x"}\n')
    written = write_report([folder], tmp_path / "r.html")
    page = written.path.read_text(encoding="utf-8")
    assert f"{folder / 'calls.jsonl'}: not a run log" in page
    with pytest.raises(ValueError, match="not a run log"):
        write_report([folder / "calls.jsonl"], tmp_path / "r2.html")


def test_a_folders_figure_is_headed_by_its_title_and_a_foreign_one_by_its_name(
        tmp_path: Path) -> None:
    """A figure saved by analysis.plotting carries its title; the page heads it with that and
    captions it with the file name. A title from elsewhere is one escaped line of at most
    TITLE_CHARS; a PNG without one, or a file that is no PNG, is headed by its name."""
    from diagym.analysis.plotting import name_figure, new_figure, save
    from diagym.analysis.report.inputs import TITLE_CHARS

    folder = tmp_path / "study"
    for name, title in (("a.png", "Success against depth, per family"),
                        ("b.png", "<script>alert(1)</script>\n" + "y" * 500), ("c.png", None)):
        figure, (axis,) = new_figure(1, 2.0)
        axis.plot([0, 1], [0, 1])
        save(name_figure(figure, title) if title else figure, folder / name)
    (folder / "d.png").write_bytes(b"not a png")
    # a header declaring 100,000 x 100,000 pixels, which Pillow refuses as a decompression bomb
    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data)
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    size = struct.pack(">IIBBBBB", 100_000, 100_000, 8, 2, 0, 0, 0)
    (folder / "e.png").write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", size)
                                   + chunk(b"IDAT", zlib.compress(b"")) + chunk(b"IEND", b""))
    page = tree(write_report([folder], tmp_path / "r.html").path)
    headed, heading = {}, ""
    for node in page.walk():
        heading = node.text() if node.tag == "h3" else heading
        if node.tag == "figure":
            headed[heading] = node.find_all("figcaption")[0].text()
    cut = " ".join(("<script>alert(1)</script>\n" + "y" * 500).split())[:TITLE_CHARS]
    assert {"Success against depth, per family": "a.png", cut: "b.png", "c.png": "c.png",
            "d.png": "d.png", "e.png": "e.png"}.items() <= headed.items()
    assert "<script>alert" not in (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "d.png" in (tmp_path / "r.html").read_text(encoding="utf-8")


def test_the_provenance_names_each_policy_by_its_label(tmp_path: Path) -> None:
    """A log's provenance names a user's policy by its spec and a controller by its name, in
    the facts of a one-run log and in the runs table of a log whose runs differ by policy;
    a user's policy's own description is listed beside its spec."""
    spec = "tests.user_policy:Described"
    one, two = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    inputs.run_cli("run", "--env", inputs.ENV, "--policy", spec, "--episodes", "2",
                   "--log", str(one))
    for name, policy in (("mine", spec), ("reference", "cache-2")):  # one log, two runs
        inputs.run_cli("run", "--env", inputs.ENV, "--policy", policy, "--episodes", "2",
                       "--log", str(two), "--resume", "--run-name", name)
    facts = report_of(tmp_path, one)
    assert f"<dt>policy</dt><dd>{spec}</dd>" in facts
    assert ("<dt>its description</dt><dd>{&quot;agent&quot;: &quot;first-ready&quot;, "
            "&quot;slot&quot;: 0}</dd>") in facts
    table = report_of(tmp_path, two)
    rows = re.findall(r"<tr><td>[^<]*</td><td>(mine|reference)</td><td>([^<]*)</td>", table)
    assert rows == [("mine", spec), ("reference", "cache-2")]
    for text in (facts, table):
        assert "{&quot;import&quot;" not in text and "{&quot;controller&quot;" not in text
