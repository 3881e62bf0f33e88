"""Outputs never replace what a user did not ask to replace, and create at most the last
directory of their path."""

from __future__ import annotations

from pathlib import Path

import pytest

from diagym.analysis.cli import main
from tests.analysis.error_lines import one_error_line as _fail

ROOT = Path(__file__).resolve().parents[2]
RUN = ["run", "--env", "StatefulWorkflow-v0", "--policy", "cache-2", "--episodes", "2"]




@pytest.fixture
def log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    path = tmp_path / "run.jsonl"
    assert main([*RUN, "--log", str(path)]) == 0
    capsys.readouterr()
    return path


def test_report_never_overwrites_its_input(log: Path, capsys: pytest.CaptureFixture[str]
                                           ) -> None:
    before = log.read_bytes()
    for force in ([], ["--force"]):
        assert _fail(["report", str(log), "--out", str(log), *force], capsys) == (
            f"diagym report: error: --out {log} is the INPUT {log}: the report would replace "
            "what it reads; give another --out FILE.html")
    assert log.read_bytes() == before


def test_report_never_overwrites_its_input_through_a_hard_link(
        log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """backup.jsonl, a hard link of the run log, is the same file by another name: compared by
    path it was replaced with HTML, and the log with it."""
    backup = tmp_path / "backup.jsonl"
    backup.hardlink_to(log)
    before = log.read_bytes()
    assert _fail(["report", str(log), "--out", str(backup), "--force"], capsys) == (
        f"diagym report: error: --out {backup} is the INPUT {log}: the report would replace "
        "what it reads; give another --out FILE.html")
    assert log.read_bytes() == before


def test_report_replaces_an_existing_page_only_with_force(
        log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "page.html"
    out.write_text("mine")
    assert _fail(["report", str(log), "--out", str(out)], capsys) == (
        f"diagym report: error: --out {out} exists; pass --force to replace it, or another "
        "--out FILE.html")
    assert out.read_text() == "mine"
    assert main(["report", str(log), "--out", str(out), "--force"]) == 0
    assert out.read_text().startswith("<!DOCTYPE html>")


def test_only_the_last_directory_is_created_outside_the_current_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(ROOT)  # tmp_path is not below the repository's root
    deep = tmp_path / "missing" / "deeper"
    assert _fail([*RUN, "--log", str(deep / "run.jsonl")], capsys) == (
        f"diagym run: error: --log {deep / 'run.jsonl'}: {tmp_path / 'missing'} does not exist "
        "(missing directories are created below the current directory; elsewhere only the "
        "last one)")
    assert _fail(["summarize", str(tmp_path / "x.jsonl"), "--out", str(deep)], capsys) \
        .startswith("diagym summarize: error: LOG")
    assert not (tmp_path / "missing").exists()
    assert main([*RUN, "--log", str(tmp_path / "new" / "run.jsonl")]) == 0
    assert (tmp_path / "new" / "run.jsonl").is_file()


@pytest.mark.parametrize("argv, made", [
    ([*RUN, "--log", "runs/a/b/run.jsonl"], "runs/a/b/run.jsonl"),
    (["summarize", "LOG", "--out", "runs/tables/x"], "runs/tables/x"),
])
def test_missing_directories_below_the_current_one_are_created(
        argv: list[str], made: str, log: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`--out runs/small` in a fresh clone, as the README writes it: runs/ is made."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    assert main([str(log) if a == "LOG" else a for a in argv]) == 0
    assert (work / made).exists()


def test_a_directory_output_needs_its_parent(log: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    deep = tmp_path / "missing" / "deeper"
    assert _fail(["summarize", str(log), "--out", str(deep)], capsys) == (
        f"diagym summarize: error: --out {deep}: {tmp_path / 'missing'} does not exist "
        "(missing directories are created below the current directory; elsewhere only the "
        "last one)")
    assert not (tmp_path / "missing").exists()
