"""Every shell and Python block of README.md and docs/*.md runs as written in a fresh copy of
the repository: a reader copies them from there, so a block that fails is a broken promise.

How a block is marked, by an HTML comment on the line just above its fence (GitHub hides it):

- no comment: the block runs as written;
- `<!-- doc-test: replace: `A` => `B`; `C` => `D` (why) -->`: it runs with each A replaced by
  B: smaller sizes for a long run, or a stand-in for a step that cannot run here (setting up
  the venv, opening a browser). Each A must occur in the block, so a stale marker fails;
- `<!-- doc-test: model: replace: `A` => `B` (why) -->` (the replacements optional): it needs
  the bundled Qwen2.5-Coder 0.5B and runs, with the replacements, against one llama.cpp server
  of it shared by every such block (`$DOC_TEST_SERVER` holds `--base-url URL --model NAME
  --timeout S --max-tokens 16` for it, `$DOC_TEST_BASE_URL` and `$DOC_TEST_MODEL` the first
  two), each block in a copy of its own (so it may not read what an earlier block wrote).
  It is skipped, saying why, where the model is not cached (`make test` fetches it, as for
  tests/llm_policies' local-model cases, whose check this reuses). A call of the 0.5B takes
  10-40 s on a loaded 2-core CPU, so such a block is cut to an episode or a resume;
- `<!-- doc-test: illustrative: why -->`: shown, never run (a synopsis with placeholders, a
  command that needs a hosted provider's key, a cluster, or the suite itself); the why is
  required.

A block tagged `text` (or untagged) is not code; one that starts like a command fails, so no
command goes unrun without a word. A Python block runs alone in a fresh interpreter (it must
carry its own imports); a shell block runs under `bash -e -o pipefail`. The blocks of one page
run in order in one copy (a later block may read what an earlier one wrote, as a reader's
would), each page in a copy of its own. "This prints `X`" right after a Python block is
checked against what the block printed.

The copy is what a clone gets: the checkout's tracked files (`git ls-files`) as they are in
the work tree, uncommitted edits included, untracked files and `.venv` not. Its `.venv` is
a link to the environment running the suite, which is on PATH, so nothing is installed again
(the code imported is the one that environment was installed from: the checkout itself under
`make test`).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from diagym.llm_policies.client.local_server import local_model, local_server
from tests.conftest import scaled
from tests.llm_policies.test_local_harnesses import _missing
from tests.tracked_copy import copy_tracked

ROOT = Path(__file__).resolve().parents[1]
PAGES = ["README.md", *sorted(p.relative_to(ROOT).as_posix() for p in ROOT.glob("docs/*.md"))]
SHELL = {"bash", "sh", "shell", "console"}
PYTHON = {"python", "py"}
NOT_CODE = {"", "text"}
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w-]*)[ \t]*\n(?P<body>.*?)^(?P=indent)```[ \t]*$",
                   re.S | re.M)
MARKER = re.compile(r"<!-- doc-test: (?P<kind>[\w-]+):\s*(?P<text>.*?)\s*-->", re.S)
REPLACEMENT = re.compile(r"`([^`]+)` => `([^`]*)`")
COMMAND_START = re.compile(r"^\s*(\$ |diagym |python |pip |make |import |from \S+ import )")
BLOCK_SECONDS = 300.0  # one block on a quiet machine, at most (a hang, not a speed limit)
KINDS = {"replace", "model", "illustrative"}
MODEL = "qwen0.5b"
CALL_SECONDS = 120.0  # one call of a model block on a quiet machine, at most


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    lang: str
    code: str
    kind: str  # "run", "replace", "model" or "illustrative"
    note: str  # the marker's text
    prints: str | None  # "This prints `X`" after the block

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def dedent(body: str, indent: str) -> str:
    return "".join(line[len(indent):] if line.startswith(indent) else line
                   for line in body.splitlines(keepends=True))


def blocks_of(page: str, text: str) -> list[Block]:
    """The fenced blocks of a page with their markers; a marker not directly above a fence,
    or of an unknown kind, is an error."""
    found: list[Block] = []
    used: set[int] = set()
    markers = {text.count("\n", 0, m.end()) + 1: m for m in MARKER.finditer(text)}
    for match in FENCE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        marker = markers.get(line - 1)
        kind, note = "run", ""
        if marker is not None:
            used.add(line - 1)
            kind, note = marker["kind"], marker["text"]
            assert kind in KINDS, f"{page}:{line}: unknown marker {kind!r}"
            assert note, f"{page}:{line}: a {kind} marker needs its text"
        after = text[match.end():].lstrip("\n")
        stated = re.match(r"This prints `([^`]+)`", after)
        found.append(Block(page, line, match["lang"], dedent(match["body"], match["indent"]),
                           kind, note, stated[1] if stated else None))
    stray = sorted(set(markers) - used)
    assert not stray, f"{page}: doc-test markers not directly above a fence, lines {stray}"
    return found


def page_blocks(page: str) -> list[Block]:
    return blocks_of(page, (ROOT / page).read_text())


MODEL_BLOCKS = [block for page in PAGES for block in page_blocks(page) if block.kind == "model"]


def fresh_copy(destination: Path) -> Path:
    """The checkout's tracked files as they are in the work tree, in destination; .venv
    linked to the environment running the suite."""
    copy_tracked(destination)
    (destination / ".venv").symlink_to(sys.prefix, target_is_directory=True)
    return destination


def environment(copy: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in {"PYTHONPATH", "PYTHONHOME", "PYTEST_CURRENT_TEST"}}
    env["PATH"] = f"{Path(sys.prefix) / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = sys.prefix
    env["MPLBACKEND"] = "Agg"
    env.update(extra or {})
    return env


def runnable(block: Block) -> str:
    code = block.code
    if block.kind in {"replace", "model"}:
        pairs = REPLACEMENT.findall(block.note)
        assert pairs or block.kind == "model", (
            f"{block.where}: a replace marker names no `A` => `B`")
        for old, new in pairs:
            assert old in code, f"{block.where}: the marker replaces {old!r}, not in the block"
            code = code.replace(old, new)
    return code


def run_block(block: Block, copy: Path, extra: dict[str, str] | None = None) -> str:
    code = runnable(block)
    if block.lang in PYTHON:
        # a file, as a user saves the snippet: worker processes that import __main__ (torchrl's
        # vector env under spawn) cannot import a script read from stdin
        script = copy / f"doc_block_{block.line}.py"
        script.write_text(code)
        command, code = [sys.executable, script.name], ""
    else:
        command = ["bash", "-e", "-o", "pipefail", "-s"]
    started = time.perf_counter()
    # A session of its own, so that a block that hangs is ended with every process it started
    # (a child left holding the pipes would keep communicate() waiting).
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, cwd=copy,
                               env=environment(copy, extra), start_new_session=True)
    try:
        stdout, stderr = process.communicate(code, timeout=scaled(BLOCK_SECONDS))
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        pytest.fail(f"{block.where}: the {block.lang} block did not end in "
                    f"{scaled(BLOCK_SECONDS):.0f} s")
    print(f"{block.where}: {time.perf_counter() - started:.1f} s")  # shown with -s or -rP
    if process.returncode != 0:
        pytest.fail(f"{block.where}: the {block.lang} block exited {process.returncode}\n"
                    f"--- block as run ---\n{code}--- stderr (tail) ---\n{stderr[-3000:]}"
                    f"--- stdout (tail) ---\n{stdout[-1500:]}")
    return stdout


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.timeout(1800)
def test_every_block_of_the_page_runs(page: str, tmp_path: Path) -> None:
    copy = fresh_copy(tmp_path / "clone")
    assert (copy / page).exists(), f"{page} is not tracked: a clone would not have it"
    for block in blocks_of(page, (copy / page).read_text()):
        if block.lang in NOT_CODE:
            first = next((ln for ln in block.code.splitlines() if ln.strip()), "")
            assert not COMMAND_START.match(first), (
                f"{block.where}: an untagged block that starts like a command; tag it bash or "
                "python (and mark it if it cannot run)")
            continue
        assert block.lang in SHELL | PYTHON, f"{block.where}: unknown language {block.lang!r}"
        if block.kind in {"illustrative", "model"}:
            continue  # a model block is test_a_model_block_runs's
        check_printed(block, run_block(block, copy))


def check_printed(block: Block, printed: str) -> None:
    if block.prints is not None:
        assert block.prints in printed.splitlines(), (
            f"{block.where}: the page says it prints {block.prints!r}; it printed "
            f"{printed[-500:]!r}")


@pytest.fixture(scope="module")
def model_server() -> Iterator[dict[str, str]]:
    """One llama.cpp server of the model for every model block (started by the first one
    that runs, not at all where they skip): what the blocks' `$DOC_TEST_...` variables hold."""
    with local_server(model=MODEL) as url:
        name = local_model(MODEL).name
        yield {"DOC_TEST_BASE_URL": url, "DOC_TEST_MODEL": name,
               "DOC_TEST_SERVER": f"--base-url {url} --model {name} "
                                  f"--timeout {scaled(CALL_SECONDS):.0f} --max-tokens 16"}


@pytest.mark.local_model
@pytest.mark.timeout(1800)
@pytest.mark.skipif(bool(_missing(MODEL)), reason=f"{MODEL} needs {', '.join(_missing(MODEL))}")
@pytest.mark.parametrize("block", MODEL_BLOCKS, ids=[b.where for b in MODEL_BLOCKS])
def test_a_model_block_runs(block: Block, tmp_path: Path,
                            model_server: dict[str, str]) -> None:
    assert block.lang in SHELL | PYTHON, f"{block.where}: unknown language {block.lang!r}"
    check_printed(block, run_block(block, fresh_copy(tmp_path / "clone"), model_server))


def test_markers_are_read() -> None:
    """The parser's own positive control: a marked page parses to what its markers say, and
    a marker astray or a replacement that no longer matches is an error, not a silent skip."""
    page = ("<!-- doc-test: illustrative: needs a key -->\n```bash\ndiagym run --policy llm\n```\n"
            "\n<!-- doc-test: replace: `--steps 9000` => `--steps 9` (small) -->\n```bash\n"
            "diagym train --steps 9000\n```\n\n  ```python\n  print(1)\n  ```\nThis prints `1`.\n")
    blocks = blocks_of("page.md", page)
    assert [(b.kind, b.lang, b.line) for b in blocks] == [
        ("illustrative", "bash", 2), ("replace", "bash", 7), ("run", "python", 11)]
    assert runnable(blocks[1]) == "diagym train --steps 9\n"
    served = blocks_of("page.md", "<!-- doc-test: model: replace: `--local` => `$DOC_TEST_SERVER` "
                                  "(the suite's server) -->\n```bash\ndiagym run --local\n```\n")
    assert served[0].kind == "model" and served[0].note.startswith("replace:")
    assert runnable(served[0]) == "diagym run $DOC_TEST_SERVER\n"
    bare = blocks_of("page.md", "<!-- doc-test: model: plays as written -->\n```bash\nls\n```\n")
    assert runnable(bare[0]) == "ls\n"
    with pytest.raises(AssertionError, match="unknown marker 'modle'"):
        blocks_of("page.md", "<!-- doc-test: modle: x -->\n```bash\nls\n```\n")
    assert blocks[2].code == "print(1)\n" and blocks[2].prints == "1"
    with pytest.raises(AssertionError, match="not directly above a fence"):
        blocks_of("page.md", "<!-- doc-test: illustrative: x -->\n\n```bash\nls\n```\n")
    stale = blocks_of("page.md", "<!-- doc-test: replace: `a` => `b` -->\n```bash\nls\n```\n")
    with pytest.raises(AssertionError, match="not in the block"):
        runnable(stale[0])


def test_the_copy_holds_uncommitted_edits_and_no_venv(tmp_path: Path) -> None:
    copy = fresh_copy(tmp_path / "clone")
    assert (copy / "README.md").read_text() == (ROOT / "README.md").read_text()
    assert (copy / ".venv").resolve() == Path(sys.prefix).resolve()
    assert shutil.which("diagym", path=environment(copy)["PATH"]) is not None


def test_a_failing_or_hanging_block_fails_the_page(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Positive controls of the runner: a block that exits non-zero, and one whose child
    outlives its time (ended with every process it started), each fail with the block's place."""
    copy = fresh_copy(tmp_path / "clone")
    failing = Block("page.md", 3, "python", "import gym_not_there\n", "run", "", None)
    with pytest.raises(pytest.fail.Exception, match="page.md:3: the python block exited 1"):
        run_block(failing, copy)
    monkeypatch.setattr(sys.modules[__name__], "BLOCK_SECONDS", 0.5)
    hanging = Block("page.md", 9, "bash", "sleep 600 &\nwait\n", "run", "", None)
    started = time.perf_counter()
    with pytest.raises(pytest.fail.Exception, match="page.md:9: the bash block did not end"):
        run_block(hanging, copy)
    assert time.perf_counter() - started < scaled(60)
