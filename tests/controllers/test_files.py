"""write_atomically: the file is the old one or the new one, never torn, and a failed write
leaves no temporary file behind (a failed checkpoint left model.zip.tmp; `report --force` on a
full disk destroyed the old page and left a cut one)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from diagym.controllers import files
from diagym.controllers.files import write_atomically


def _full_disk(*_args: object) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_write_replaces_the_file_whole(tmp_path: Path) -> None:
    path = tmp_path / "page.html"
    path.write_text("old")
    write_atomically(path, lambda handle: handle.write(b"new"))
    assert path.read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["page.html"]


@pytest.mark.parametrize("where", ["write", "fsync"])
def test_a_failed_write_keeps_the_old_file_and_leaves_nothing(
        where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "model.zip"
    path.write_bytes(b"old model")

    def write(handle: object) -> None:
        handle.write(b"half a mo")  # type: ignore[attr-defined]
        if where == "write":
            _full_disk()

    if where == "fsync":
        monkeypatch.setattr(files.os, "fsync", _full_disk)
    with pytest.raises(OSError, match="No space left"):
        write_atomically(path, write)
    assert path.read_bytes() == b"old model"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.zip"]


def test_report_force_on_a_full_disk_keeps_the_old_page(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from diagym.analysis.cli import main

    log = tmp_path / "run.jsonl"
    assert main(["run", "--env", "StatefulWorkflow-v0", "--policy", "cache-2", "--episodes", "2",
                 "--log", str(log)]) == 0
    page = tmp_path / "page.html"
    page.write_text("the old page")
    monkeypatch.setattr(files.os, "fsync", _full_disk)
    assert main(["report", str(log), "--out", str(page), "--force"]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "diagym report: error: [Errno 28] No space left on device")
    assert page.read_text() == "the old page"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["page.html", "run.jsonl"]
    assert os.access(page, os.R_OK)
