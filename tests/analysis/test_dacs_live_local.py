"""One phase-4 trial end to end with a real local model in every role: plumbing, never
quality. Every call is answered and logged, every steering request reaches the orchestrator,
and every decision carries a verdict (the judge's decoding is held to the verdict schema).

The model is Qwen2.5-Coder 0.5B, the smallest bundled model that writes the STEER marker
(Gemma 270M copies its prompt and SmolLM2 greets: docs/RESULTS.md). One agent of ra1_n3 with
one turn keeps the trial to three short calls, one a role (the three agents' trial, nine
calls, took 17 min at load 25-29 on 2 cores).
"""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

from diagym.analysis.studies.dacs_live.design import SCENARIOS, LiveScenario
from diagym.analysis.studies.dacs_live.judge import VERDICT_SCHEMA
from diagym.analysis.studies.dacs_live.trial import run_trial
from diagym.llm_policies.client.local_server import QWEN_05B, local_model, local_server
from diagym.llm_policies.client.split_weights import cached_path
from diagym.llm_policies.client.transport import ChatClient
from diagym.llm_policies.steering.orchestrator import llm_orchestrator

MODEL = "qwen0.5b"
MISSING = [m for m in ("llama_cpp", "fastapi", "uvicorn") if importlib.util.find_spec(m) is None]
if not cached_path(QWEN_05B).is_file():  # make test or fetch-qwen fetches it
    MISSING.append(f"{cached_path(QWEN_05B)} (make fetch-qwen)")
pytestmark = [pytest.mark.local_model, pytest.mark.timeout(900),
              pytest.mark.skipif(bool(MISSING), reason=f"{MODEL} needs {', '.join(MISSING)}")]


def test_qwen_plays_a_dacs_trial_end_to_end() -> None:
    scenario = LiveScenario("ra1_n3-a1", SCENARIOS["ra1_n3"].agents[:1])
    calls: list[dict[str, Any]] = []
    with local_server(model=MODEL) as url:
        name = local_model(MODEL).name
        with ChatClient(base_url=url, model=name, max_tokens=48, timeout=300.0,
                        response_format="none") as chat, \
                ChatClient(base_url=url, model=name, max_tokens=16, timeout=300.0,
                           response_format="json_object", json_schema=VERDICT_SCHEMA) as judge:
            decisions, figures = run_trial(
                scenario, "dacs", 0, agent=chat, orchestrator=llm_orchestrator(chat),
                judge=judge, sink=calls.append, max_steps=1, max_steers=1,
                judge_format="json")
    assert all(c["status"] == "ok" for c in calls), [c["error"] for c in calls]
    assert sum(c["role"] == "agent" for c in calls) == figures["turns"] == scenario.n_agents
    assert figures["steers"] == len(decisions) == 1  # the orchestrator and judge were played
    assert sum(c["role"] == "orchestrator" for c in calls) == figures["steers"]
    assert sum(c["role"] == "judge" for c in calls) == sum(d.topic is not None
                                                           for d in decisions)
    assert all(d.judge is not None for d in decisions if d.topic is not None)
