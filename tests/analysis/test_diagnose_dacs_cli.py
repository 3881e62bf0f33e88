"""`diagym diagnose --env DACSSteering-v0` end to end: each DACS reader played as an opaque
policy is ranked first, the JSON is the DACS contract, the text env gives the programmed
reader's diagnosis, bad flags are one line.

The agents below are loaded by `--policy THIS_FILE:Name`, as a user's policy would be: the
command sees an ImportedPolicy whose description names this file and a class, never the reader
inside.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from analysis.cli.main import main
from analysis.diagnose import dacs
from controllers.dacs.readers import dacs_controller

HERE = Path(__file__).resolve()
TOP_KEYS = {"env", "policy", "episodes", "decisions", "configurations", "attribution",
            "attribution_weights", "env_contaminated", "contamination_sources", "mechanisms",
            "provenance"}
MECHANISM_KEYS = {"name", "family", "aliases", "params", "epsilon", "log_likelihood",
                  "log_lr_to_best"}
ATTRIBUTION_KEYS = {"correct", "contamination", "truncation", "distractor", "ambiguous"}
READER_OF = {"AgentA": "dacs-reader", "AgentB": "flat-reader", "AgentC": "flat-recency",
             "AgentD": "registry-only", "AgentE": "uniform"}
# the readers that choose identically on the battery, named as the diagnosis names them
NAMED = {"dacs-reader": "dacs-reader", "flat-reader": "dacs-reader"}


class _Hidden:
    reader = ""

    def __init__(self) -> None:
        self.inner = dacs_controller(self.reader)

    def reset(self, *, seed: int | None = None) -> None:
        self.inner.reset(seed=seed)

    def act(self, observation: Any, info: dict[str, Any]) -> int:
        return self.inner.act(observation, info)


class AgentA(_Hidden):
    reader = "dacs-reader"


class AgentB(_Hidden):
    reader = "flat-reader"


class AgentC(_Hidden):
    reader = "flat-recency"


class AgentD(_Hidden):
    reader = "registry-only"


class AgentE(_Hidden):
    reader = "uniform"


def diagnose(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["diagnose", "--env", "DACSSteering-v0", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("agent", sorted(READER_OF))
def test_an_opaque_reader_is_ranked_first(capsys: pytest.CaptureFixture[str],
                                          agent: str) -> None:
    reader = READER_OF[agent]
    result = diagnose(capsys, "--policy", f"{HERE}:{agent}")
    assert reader not in json.dumps(result["policy"])  # its name was hidden
    best, runner_up = result["mechanisms"][:2]
    assert best["name"] == NAMED.get(reader, reader)
    assert reader in [best["name"], *best["aliases"]]
    assert best["log_lr_to_best"] == 0.0
    if reader == "uniform":  # any reader at lapse 1 is uniform: the runner-up ties
        assert best["epsilon"] == 0.0
    else:
        assert best["epsilon"] == 0.0 and runner_up["log_lr_to_best"] < 0


def test_the_json_is_the_dacs_contract(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    result = diagnose(capsys, "--policy", "flat-recency", "--budget", "8", "--out", str(out))
    assert set(result) == TOP_KEYS
    assert set(result["attribution"]) == ATTRIBUTION_KEYS
    assert all(set(m) == MECHANISM_KEYS for m in result["mechanisms"])
    assert result["env"] == "DACSSteering-v0"
    assert result["episodes"] == 8
    assert result["configurations"] == [dict(c) for c in dacs.DEFAULT_BATTERY]
    assert sum(result["attribution"].values()) == result["decisions"] == 8 * 15
    assert result["attribution"]["contamination"] > 0  # recency reads the other agents' facts
    lrs = [m["log_lr_to_best"] for m in result["mechanisms"]]
    assert lrs == sorted(lrs, reverse=True) and lrs[0] == 0.0
    for m in result["mechanisms"]:
        low, high = m["params"]["epsilon_interval"]
        assert low <= m["epsilon"] <= high
    assert sorted(p.name for p in out.iterdir()) == ["diagnosis.json", "diagnosis.md"]
    assert json.loads((out / "diagnosis.json").read_text()) == result
    assert "| 1 | flat-recency |" in (out / "diagnosis.md").read_text()


def test_the_text_oracle_is_diagnosed_as_the_reader_it_is(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The text oracle answers as the DACS reader wherever the reader's rule finds a value,
    through the prompts and the text wrapper, and guesses from its own stream elsewhere: its
    best fit is the programmed reader's, to the log-likelihood (a guess weighs 1/n either
    way)."""
    text = diagnose(capsys, "--policy", "text-oracle", "--budget", "4")
    programmed = diagnose(capsys, "--policy", "dacs-reader", "--budget", "4")
    assert text["policy"]["llm"] == "text-oracle"
    assert text["decisions"] == programmed["decisions"] == 4 * 15
    assert text["mechanisms"][0] == programmed["mechanisms"][0]
    assert text["mechanisms"][0]["name"] == "dacs-reader"


def test_a_reader_that_only_guesses_is_named_uniform() -> None:
    """Without cascade requests registry-only's rule never binds: it chooses as uniform does,
    and the one fit is named for guessing."""
    traces = dacs.play_battery(dacs_controller("registry-only"), dacs.DEFAULT_BATTERY[:2],
                               episodes=2)
    fits = dacs.fit_readers(dacs.decisions_of(traces))
    merged = next(f for f in fits if "registry-only" in f.names)
    assert merged.name == "uniform" and merged.aliases == ("registry-only",)


@pytest.mark.parametrize(("argv", "message"), [
    (["--budget", "6", "--policy", "uniform"],
     "diagym diagnose: error: --budget 6: the DACSSteering-v0 battery has 4 configurations; "
     "give a multiple of 4"),
    ([], "diagym diagnose: error: --env DACSSteering-v0 plays the DACS battery; give --policy "
         "NAME"),
    (["--policy", "uniform", "--log", "run.jsonl"],
     "diagym diagnose: error: --log and --resume are for StatefulWorkflow-v0; --env "
     "DACSSteering-v0 is diagnosed live only"),
])
def test_bad_input_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                               capsys: pytest.CaptureFixture[str], argv: list[str],
                               message: str) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["diagnose", "--env", "DACSSteering-v0", *argv]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1] == message
    assert "Traceback" not in err
