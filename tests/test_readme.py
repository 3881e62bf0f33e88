"""The README's Python examples run as written (in order, sharing one namespace)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", README.read_text(), flags=re.S | re.M)


def test_the_readme_has_python_examples() -> None:
    assert len(python_blocks()) >= 3


def test_the_readme_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)  # the examples may write files (a run log)
    namespace: dict[str, object] = {"__name__": "readme"}
    for number, block in enumerate(python_blocks(), start=1):
        exec(compile(block, f"README.md python block {number}", "exec"), namespace)
    printed = capsys.readouterr().out
    assert printed.split()[0] in {"None", "dependency", "candidate", "completed"}
    assert len(namespace["records"]) == 256  # type: ignore[arg-type]
    assert (tmp_path / "cache2.jsonl").exists()
