"""An argument error and `diagym --help` answer without importing the libraries a command
runs on (numba, the env classes, the controllers), so they take a fraction of a second; the
seconds themselves are measured in benchmarks/startup.py, not here. Gymnasium is imported:
`import diagym`, which every `diagym.*` import runs first, registers the env ids."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import scaled

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("numba", "diagym.envs.workflow.env", "diagym.envs.dacs.env", "torch", "ray", "scipy",
         "matplotlib", "diagym.controllers.registry")

PROBE = f"""
import contextlib, io, json, sys
HEAVY = {HEAVY!r}
from diagym.analysis.cli.main import main
err = io.StringIO()
with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
    try:
        status = main(sys.argv[1:])
    except SystemExit as stop:
        status = stop.code
print(json.dumps({{"status": status, "stderr": err.getvalue(),
                  "modules": sorted(m for m in sys.modules if m in HEAVY)}}))
"""


def _probe(*argv: str) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], cwd=ROOT, capture_output=True,
                          text=True, timeout=scaled(120), check=True)
    return json.loads(done.stdout)


@pytest.mark.parametrize("argv", [
    ("--help",),
    ("run", "--env", "StatefulWorkflow-v0", "--policy", "cache-2", "--epsiodes", "5"),
    ("train", "--env", "StatefulWorkflow-v0", "--step", "10"),
])
def test_help_and_a_misspelt_flag_import_no_library(argv: tuple[str, ...]) -> None:
    seen = _probe(*argv)
    assert seen["status"] in (0, 2)
    assert seen["modules"] == []


def _command_helps() -> list[tuple[str, ...]]:
    """`COMMAND --help` for every command, and for each sub-command of one that has them."""
    import argparse

    from diagym.analysis.cli.main import build_parser

    found = []
    for action in build_parser(lazy=False)._subparsers._group_actions:
        for name, sub in action.choices.items():
            inner = [a for a in sub._actions if isinstance(a, argparse._SubParsersAction)]
            found += ([(name, child, "--help") for a in inner for child in a.choices]
                      or [(name, "--help")])
    return found


# What a help page may import: the env families' parameters (gymnasium, ~0.3 s) name some
# commands' choices; numba, scipy, torch, ray and the policies' kernels take seconds.
HELP_HEAVY = ("numba", "torch", "ray", "scipy", "matplotlib", "diagym.controllers.registry")


@pytest.mark.parametrize("argv", _command_helps(), ids=" ".join)
def test_every_help_page_imports_no_kernel_or_numerics_library(argv: tuple[str, ...]) -> None:
    seen = _probe(*argv)
    assert seen["status"] == 0
    assert [m for m in seen["modules"] if m in HELP_HEAVY] == []


def test_a_wrong_policy_name_is_answered_without_the_libraries() -> None:
    seen = _probe("run", "--env", "StatefulWorkflow-v0", "--policy", "cache2", "--episodes", "1")
    assert seen["status"] == 2
    assert "did you mean cache-2?" in seen["stderr"]
    assert seen["modules"] == []


def test_misspelt_flag_is_reported_before_values_are_converted() -> None:
    """`--policy cache2` is wrong too, but the unknown flag is named first, with its closest
    spelling, and the policy names were never loaded to check the other value."""
    seen = _probe("run", "--env", "StatefulWorkflow-v0", "--policy", "cache2", "--epsiodes", "5")
    assert seen["status"] == 2
    assert seen["stderr"] == ("diagym run: error: unrecognized arguments: --epsiodes (did you "
                              "mean --episodes?) (see diagym run --help)\n")
    assert seen["modules"] == []


def test_run_help_still_lists_the_programmed_policies() -> None:
    from diagym.controllers.registry import POLICY_NAMES

    shown = subprocess.run([sys.executable, "-m", "diagym.analysis.cli", "run", "--help"], cwd=ROOT,
                           capture_output=True, text=True, timeout=scaled(120), check=True).stdout
    flat = " ".join(shown.split()).replace("- ", "-")
    assert all(name in flat for name in POLICY_NAMES)


def test_dacs_live_choices_are_the_libraries() -> None:
    from diagym.analysis.cli import dacs_live
    from diagym.analysis.studies.dacs_live.design import SCENARIOS
    from diagym.analysis.studies.dacs_live.judge import JUDGE_FORMATS
    from diagym.llm_policies.steering.orchestrator import ORCHESTRATOR_HARNESSES

    assert dacs_live.ORCHESTRATOR_HARNESSES == ORCHESTRATOR_HARNESSES
    assert dacs_live.JUDGE_FORMATS == JUDGE_FORMATS
    assert dacs_live.SCENARIO_NAMES == tuple(SCENARIOS)


def test_a_run_of_a_reference_controller_imports_no_scipy_stats() -> None:
    """`diagym run`'s summary needs one normal quantile (scipy.special.ndtri, what
    scipy.stats.norm.ppf computes): importing scipy.stats cost 0.3-0.8 s of every run."""
    probe = ("import json, sys\n"
             "from diagym.analysis.cli.main import main\n"
             "main(['run', '--env', 'StatefulWorkflow-v0', '--policy', 'cache-2', "
             "'--episodes', '2', '--json'])\n"
             "print(json.dumps(sorted(m for m in sys.modules if m.startswith('scipy.stats'))),"
             " file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                          text=True, timeout=scaled(300), check=True)
    assert json.loads(done.stderr.splitlines()[-1]) == []
