"""A mistyped flag, command, choice or policy is one line naming the closest thing the
command knows, with exit status 2; flags are never abbreviated; a user's policy is named by
its import spec wherever a run is described."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from diagym.analysis.cli import main
from diagym.analysis.cli.main import build_parser
from tests.analysis.error_lines import one_error_line as _fail

RUN = ["run", "--env", "StatefulWorkflow-v0", "--policy", "cache-2"]


def test_a_misspelled_flag_is_named_with_the_closest_one(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert _fail([*RUN, "--epsiodes", "5"], capsys) == (
        "diagym run: error: unrecognized arguments: --epsiodes (did you mean --episodes?) "
        "(see diagym run --help)")
    assert _fail([*RUN, "--episodes", "2", "--sed=3"], capsys) == (
        "diagym run: error: unrecognized arguments: --sed=3 (did you mean --seed?) "
        "(see diagym run --help)")
    assert _fail(["rcwt", "sweep", "--windw", "5"], capsys).startswith(
        "diagym rcwt sweep: error: unrecognized arguments: --windw (did you mean --window?)")


def test_a_flag_is_never_abbreviated(capsys: pytest.CaptureFixture[str]) -> None:
    assert _fail([*RUN, "--epi", "5"], capsys) == (
        "diagym run: error: unrecognized arguments: --epi (did you mean --episodes?) "
        "(see diagym run --help)")

    def walk(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
        found = [parser]
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for child in action.choices.values():
                    found += walk(child)
        return found

    parsers = walk(build_parser())
    assert len(parsers) > 12 and not any(p.allow_abbrev for p in parsers)


def test_a_misspelled_command_or_choice_names_the_closest(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert _fail(["rnu"], capsys).endswith("; did you mean run? (see diagym --help)")
    assert _fail([*RUN, "--episodes", "1", "--harness", "jsno"], capsys).endswith(
        "(choose from 'json', 'tools', 'chat'); did you mean json? (see diagym run --help)")


def test_a_misspelled_policy_names_the_closest(capsys: pytest.CaptureFixture[str]) -> None:
    line = _fail(["run", "--env", "StatefulWorkflow-v0", "--policy", "cache2",
                  "--episodes", "1"], capsys)
    assert line.startswith("diagym run: error: argument --policy: got 'cache2'; did you mean "
                           "cache-2? it must be one of exact, cache-2,")


@pytest.mark.parametrize("spec", ["my.py", "agents/mine.py", "my_package.agents"])
def test_a_policy_file_without_its_name_says_to_add_it(
        spec: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert _fail(["run", "--env", "StatefulWorkflow-v0", "--policy", spec, "--episodes", "1"],
                 capsys) == (
        f"diagym run: error: argument --policy: {spec!r} names no policy inside it: add the "
        f"class or function after a colon, as {spec}:Name (see diagym run --help)")


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.startswith("diagym ")


def test_the_lazy_parser_builds_only_the_chosen_command() -> None:
    parser = build_parser(lazy=True)
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert set(commands.choices) == set(next(
        a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)
    ).choices)
    args = parser.parse_args([*RUN, "--episodes", "3"])
    assert args.episodes == 3 and args.func.__module__ == "diagym.analysis.cli.run"
    assert "--episodes" not in commands.choices["audit"]._option_string_actions


def test_a_users_policy_is_named_by_its_spec(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    spec = "tests.user_policy:FirstReady"
    log = tmp_path / "run.jsonl"
    assert main(["run", "--env", "StatefulWorkflow-v0", "--policy", spec, "--episodes", "2",
                 "--log", str(log)]) == 0
    capsys.readouterr()
    assert main(["summarize", str(log)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith(f"{spec} on StatefulWorkflow-v0 ") and "{\"import\"" not in first


@pytest.mark.parametrize(("policy", "described"), [
    ("tests.user_policy:Described", {"import": "tests.user_policy:Described",
                                     "policy": {"agent": "first-ready", "slot": 0}}),
    ("cache-2", {"controller": "cache-2"}),
])
def test_diagnose_names_the_policy_by_its_label_where_people_read_it(
        policy: str, described: dict[str, object], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The terminal summary, diagnosis.md's title and report.html's provenance name the
    policy as summarize does (its spec, the controller's name); diagnosis.json keeps the
    description scripts read."""
    out = tmp_path / "diagnosis"
    assert main(["diagnose", "--policy", policy, "--budget", "4", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    summary = [line for line in printed.splitlines() if " on StatefulWorkflow-v0: " in line]
    assert summary == [f"{policy} on StatefulWorkflow-v0: 4 episodes over 2 configurations"]
    markdown = (out / "diagnosis.md").read_text()
    assert markdown.splitlines()[0] == f"# Diagnosis of {policy} on StatefulWorkflow-v0"
    html = (out / "report.html").read_text()
    assert f"<dt>policy</dt><dd>{policy}</dd>" in html
    for text in (printed, markdown, html.replace("&quot;", '"')):
        assert '{"import"' not in text and '{"controller"' not in text
    assert json.loads((out / "diagnosis.json").read_text())["policy"] == described
