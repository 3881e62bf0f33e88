"""The README's Python examples run as written (in order, sharing one namespace) and print
what it says they print; its opening tells a new user what to do first and what installing adds."""

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
    stated = re.findall(r"^This prints `([^`]+)`", README.read_text(), flags=re.M)
    assert stated and all(line in printed.splitlines() for line in stated)
    assert len(namespace["records"]) == 256  # type: ignore[arg-type]
    assert (tmp_path / "cache2.jsonl").exists()


def test_the_opening_says_what_to_do_first_and_what_installing_adds() -> None:
    text = README.read_text()
    opening = text[: text.index("\n## ")]  # before the first section
    for needed in ("diagym --help", "[docs/API.md](docs/API.md)", "pip install dist/diagym-",
                   "one import name, `diagym`: `import diagym` registers every env",
                   "not random seeds or task seeds", "[References](#references)"):
        assert needed in opening, needed
    activate = opening.index("source .venv/bin/activate")  # `make demo` leaves diagym in .venv
    assert activate < opening.index("diagym --help")
    assert "source $(VENV)/bin/activate" in (README.parent / "Makefile").read_text()
    assert "set `torch.set_num_threads(1)`" in text  # for users' own SB3 loops
    assert "Why `mlp` stays the default" in text  # the default arch stays at the floor
