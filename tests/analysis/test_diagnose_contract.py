"""Both env families' diagnoses go through one contract (analysis/diagnose/contract.py): the
family is found by envs.family_of in DIAGNOSES, each family's module plans, plays and reads a
log with the same four functions, its budget rule is its own, and report.py writes either
diagnosis with the same functions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from diagym import envs
from diagym.analysis.diagnose import contract
from diagym.analysis.diagnose.battery import DEFAULT_ALLOCATION, DEFAULT_BATTERY
from diagym.analysis.diagnose.contract import DIAGNOSES, Diagnosis
from diagym.analysis.diagnose.hypotheses import FITTED_FAMILIES
from diagym.analysis.diagnose.report import summary, to_json, to_markdown, write
from diagym.controllers.dacs.readers import dacs_controller
from diagym.controllers.workflow.adapter import ReferencePolicy

FUNCTIONS = ("plan", "diagnose_policy", "diagnose_log", "holds_runs")


def test_each_family_is_found_by_its_env_and_provides_the_four_functions() -> None:
    assert set(DIAGNOSES) == {envs.WORKFLOW, envs.DACS}
    for name, family in DIAGNOSES.items():
        assert envs.family_of(family.env_id) == name
        assert contract.family_of(family.env_id) is family
        module = family.implementation()
        assert all(callable(getattr(module, f)) for f in FUNCTIONS), family.module
    # another preset of a family is not the env its battery plays
    assert contract.family_of("StatefulWorkflowHistory-v0") is None
    assert contract.family_of("CartPole-v1") is None


def test_each_family_keeps_its_own_budget_rule() -> None:
    workflow = DIAGNOSES[envs.WORKFLOW].implementation()
    fixed = workflow.plan(None, "exact", None, False, 0)
    assert fixed.total == DIAGNOSES[envs.WORKFLOW].default_budget == 512
    assert fixed.play["allocation"] == DEFAULT_ALLOCATION
    assert fixed.play["adaptive_budget"] is None
    assert workflow.plan(64, "exact", None, True, 0).play["adaptive_budget"] == 64
    dacs = DIAGNOSES[envs.DACS].implementation()
    played = dacs.plan(None, "dacs-reader", None, False, 0)
    assert played.total == DIAGNOSES[envs.DACS].default_budget == 32
    assert played.play == {"episodes": 8}
    with pytest.raises(ValueError, match=r"^--budget 6: the DACSSteering-v0 battery has 4 "
                                         r"configurations; give a multiple of 4$"):
        dacs.plan(6, "dacs-reader", None, False, 0)


def test_either_familys_diagnosis_is_written_by_the_same_functions(tmp_path: Path) -> None:
    workflow = DIAGNOSES[envs.WORKFLOW].implementation().diagnose_policy(
        lambda env: ReferencePolicy.for_env("exact", env), battery=DEFAULT_BATTERY,
        allocation=(2,) * len(DEFAULT_BATTERY))
    dacs = DIAGNOSES[envs.DACS].implementation().diagnose_policy(
        lambda env: dacs_controller("dacs-reader"), episodes=1)
    assert set(workflow.family_fits) == set(FITTED_FAMILIES)
    for diagnosis, figures in ((workflow, ["diagnosis.png"]), (dacs, [])):
        assert isinstance(diagnosis, Diagnosis)
        found = to_json(diagnosis)
        assert (found["env"], found["headline"]) == (diagnosis.env, diagnosis.headline)
        assert found["verdicts"] == dict(diagnosis.verdicts)
        assert found["episodes"] == diagnosis.episodes and "provenance" in found
        assert summary(diagnosis)[1] == diagnosis.headline
        assert f"**{diagnosis.headline}**" in to_markdown(diagnosis)
        directory = tmp_path / diagnosis.env
        directory.mkdir()
        written = write(diagnosis, directory)
        assert [p.name for p in written] == ["diagnosis.json", "diagnosis.md", *figures]
        saved = json.loads((directory / "diagnosis.json").read_text(encoding="utf-8"))
        assert {k: v for k, v in saved.items() if k != "provenance"} == json.loads(json.dumps(
            {k: v for k, v in found.items() if k != "provenance"}))
