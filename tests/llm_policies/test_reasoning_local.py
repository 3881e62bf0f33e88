"""The local Qwen2.5-Coder 0.5B plays one think-then-act episode (--reasoning-tokens) of
StatefulWorkflow-v0, whose first failed call ends it, through `diagym run --local`, where its
weights are cached (as tests/llm_policies/test_local_harnesses.py plays the direct answer).

Plumbing, never policy quality: every call is answered, unconstrained (a think-then-act reply
cannot be held to a bare JSON object), under the cap of the answer's reserve plus the budget;
each call line splits its output into reasoning and answer tokens that add up; the episode ends
in a category the wrapper, the env or the new cut_reasoning names.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from diagym.analysis.cli import main
from diagym.envs.workflow.layout import FAILURE_NAMES
from diagym.llm_policies.client.local_server import QWEN_05B
from diagym.llm_policies.client.split_weights import cached_path
from diagym.llm_policies.text_actions import REASONING_CUT, TEXT_FAILURES

ANSWER, BUDGET = 64, 96
MISSING = [module for module in ("llama_cpp", "fastapi", "uvicorn")
           if importlib.util.find_spec(module) is None]
if not cached_path(QWEN_05B).is_file():
    MISSING.append(f"{cached_path(QWEN_05B)} (make fetch-qwen)")

pytestmark = [pytest.mark.local_model, pytest.mark.timeout(1800),
              pytest.mark.skipif(bool(MISSING), reason=f"needs {', '.join(MISSING)}")]


def test_qwen_plays_a_think_then_act_episode(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "run.jsonl"
    status = main(["run", "--env", "StatefulWorkflow-v0", "--policy", "llm", "--local",
                   "qwen0.5b", "--episodes", "1",
                   "--max-tokens", str(ANSWER), "--reasoning-tokens", str(BUDGET),
                   "--log", str(log), "--json"])
    assert status == 0, capsys.readouterr().err
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    (session,) = [line for line in lines if line["type"] == "session"]
    assert session["run"]["policy"]["reasoning_tokens"] == BUDGET
    calls = [line for line in lines if line["type"] == "call"]
    (episode,) = [line["record"] for line in lines if line["type"] == "episode"]
    assert calls
    for call in calls:
        assert call["status"] == "ok", call["error"]
        assert call["response_format"] == "none" and call["reasoning_budget"] == BUDGET
        assert 0 < call["provider_completion_tokens"] <= ANSWER + BUDGET
        assert (call["cl100k_reasoning_tokens"] + call["cl100k_answer_tokens"]
                == call["cl100k_completion_tokens"])
        if call["action_status"] == REASONING_CUT:
            assert call["finish_reason"] == "length" and call["response"] == ""
    assert episode["first_failure"] in {None, *FAILURE_NAMES, *TEXT_FAILURES, REASONING_CUT}
