"""The README is a newcomer's first screen and a table of contents: it says what diagym is and
why one would use it, shows one block that starts a user's path (set up and activate, a
reference controller, their own agent run and diagnosed with --log and --out, the report),
stays short, and links every page; what it used to hold in full lives in those pages, and
every relative link of the docs resolves. The blocks themselves run in test_doc_blocks.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
# Linked from the README's table of contents, written by another change.
PENDING = {"docs/INTEGRATIONS.md"}
LINK = re.compile(r"\]\(([^)\s]+)\)")


def opening() -> str:
    text = README.read_text()
    return text[: text.index("\n## ")]  # the first screen: before the first section


def test_the_first_screen_says_what_and_why_and_shows_one_block() -> None:
    first = opening()
    assert len(first.splitlines()) <= 45
    assert "Why use it" in first and "what breaks" in first
    blocks = re.findall(r"^```(\w*)\n(.*?)^```", first, flags=re.S | re.M)
    assert len(blocks) == 1 and blocks[0][0] == "bash"
    lines = [line for line in blocks[0][1].splitlines() if line.strip()]
    setup = next(i for i, line in enumerate(lines) if "make venv" in line)
    activate = next(i for i, line in enumerate(lines) if "source .venv/bin/activate" in line)
    first_command = next(i for i, line in enumerate(lines) if line.startswith("diagym "))
    assert setup <= activate <= first_command
    commands = " ".join(lines)
    assert re.search(r"diagym run \S+ \S+ --policy cache-2 ", commands)  # a reference controller
    own = re.search(r"diagym run [^#]*--policy (\S+\.py:\w+)[^#]*--log \S+", commands)
    assert own, "the user's own agent, logged"
    assert re.search(rf"diagym diagnose [^#]*--policy {re.escape(own[1])} [^#]*--out \S+",
                     commands)
    assert re.search(r"diagym report [^#]*--out report\.html", commands)
    assert "report.html" in lines[-1]  # then open it
    assert "source $(VENV)/bin/activate" in (ROOT / "Makefile").read_text()


def test_the_readme_is_short_and_links_every_page() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 260
    linked = set(LINK.findall(text))
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert f"docs/{page.name}" in linked, f"the README's contents do not link docs/{page.name}"
    assert PENDING <= linked


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but - and _ dropped, spaces to -."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(page: Path) -> None:
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        name = file.relative_to(ROOT).as_posix() if file.is_relative_to(ROOT) else str(file)
        if name in PENDING and not file.exists():
            continue
        assert file.exists(), f"{page.name}: {target} does not exist"
        if anchor and file.suffix == ".md":
            headings = re.findall(r"^#+ (.+)$", file.read_text(), flags=re.M)
            assert anchor in {slug(h) for h in headings}, f"{page.name}: no heading #{anchor}"


# What the old, 920-line README held in full, and one sentence of it that must still be
# found where it moved: nothing a user needs is lost in the rewrite.
MOVED = {
    "install": ("README.md", "one import name, `diagym`: `import diagym` registers every env"),
    "wheel": ("README.md", "pip install dist/diagym-*.whl"),
    "seed numbering": ("README.md", "not random seeds or task seeds"),
    "references": ("README.md", "arXiv:2611.03227"),
    "StatefulWorkflow": ("docs/WORKFLOW.md", "`execute(v, a)` runs operation v with candidate"),
    "the runner": ("docs/WORKFLOW.md", "This prints `False 0.0`"),
    "reproduce": ("docs/WORKFLOW.md", "689,152 episodes"),
    "DACSSteering": ("docs/DACS.md", "| `observation_mode` | `text` (the default"),
    "dacs-live": ("docs/DACS.md", "Of the bundled models only Qwen2.5-Coder 0.5B plays"),
    "own agent": ("docs/AGENTS.md", "**Checked when loaded and made**"),
    "diagnose": ("docs/DIAGNOSE.md", "**It says when nothing fits.**"),
    "adaptive": ("docs/DIAGNOSE.md", "`--adaptive` plays rounds of 4 episodes"),
    "DACS diagnosis": ("docs/DIAGNOSE.md", "`--env DACSSteering-v0` plays the DACS battery"),
    "attribution": ("docs/DIAGNOSE.md", "Cohen's\nkappa 0.683 [0.658, 0.707]"),
    "report": ("docs/REPORT.md", "a 10,000-episode log makes a 1 MB page"),
    "harnesses": ("docs/LLM.md", "| `tools` | the same conversation, with native OpenAI `tools`"),
    "local server": ("docs/LLM.md", "What the local server (`--local`, `serve-local`"),
    "inspect": ("docs/LLM.md", "inspect eval diagym/diagnosis"),
    "RL": ("docs/RL.md", "set `torch.set_num_threads(1)`"),
    "mlp default": ("docs/RL.md", "Why `mlp` stays the default"),
    "torchrl": ("docs/RL.md", "passes `check_env_specs`"),
    "RCWT": ("docs/RCWT.md", "theta = W (1 - p0)"),
    "exit status": ("docs/CLI.md", "130 / 143 interrupted (resumable)"),
    "Ray": ("docs/CLI.md", "`--executor ray`"),
    "speed": ("docs/CLI.md", "`make bench` runs `benchmarks/env_step.py`"),
    "API": ("README.md", "[docs/API.md](docs/API.md)"),
}


@pytest.mark.parametrize("topic", MOVED)
def test_what_the_readme_held_is_where_it_moved(topic: str) -> None:
    page, sentence = MOVED[topic]
    words = " ".join((ROOT / page).read_text().split())  # line breaks are the page's own
    assert " ".join(sentence.split()) in words, f"{topic}: {sentence!r} is not in {page}"
