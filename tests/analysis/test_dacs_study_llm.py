"""The DACS study with a chat model that sometimes answers no JSON: every arm is measured,
invalid replies count as wrong decisions, and a rerun on the same log resumes."""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

from diagym.analysis.studies.dacs_study.design import LLM_ARMS
from diagym.analysis.studies.dacs_study.run import play_phases, text_env
from diagym.llm_policies.oracle import DacsOracle, InProcessChat
from diagym.llm_policies.policy import LLMPolicy, renderer_for


class Flaky:
    """The DACS text oracle, except that a prompt whose checksum is 0 mod 4 gets a reply
    that is not JSON: deterministic in the prompt, so a replayed episode replays the same
    replies. `calls` counts the model calls made."""

    def __init__(self) -> None:
        self.oracle = DacsOracle()
        self.calls = 0
        self.invalid = 0

    def __call__(self, messages: Any) -> str:
        self.calls += 1
        text = "\n".join(str(m.get("content", "")) for m in messages)
        if zlib.crc32(text.encode()) % 4 == 0:
            self.invalid += 1
            return "I think the answer is B"
        return self.oracle(messages)


def study(model: Flaky, log: Path, resume: bool) -> list[Any]:
    def make_policy(_name: str, env: Any) -> LLMPolicy:
        return LLMPolicy(InProcessChat(model), renderer_for(env))

    return play_phases(make_policy, arms=LLM_ARMS, episodes=3, phases=("diversity",),
                     log=log, resume=resume, make_env=text_env)


def test_invalid_replies_are_measured_and_the_study_resumes(tmp_path: Path) -> None:
    log = tmp_path / "dacs.jsonl"
    model = Flaky()
    results = study(model, log, resume=False)
    assert model.invalid > 0  # the fixture really sent replies that are no answer
    assert len(results) == 3 * len(LLM_ARMS)
    assert sum(r.invalid for r in results) == model.invalid
    assert all(r.unmeasured == 0 for r in results)
    assert all(0.0 <= r.accuracy < 1.0 for r in results if r.invalid)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    records = [e["record"] for e in lines if "record" in e]
    assert len(records) == 3 * len(results)
    assert all(r["metrics"]["window_tokens"] for r in records)  # every record is measured
    assert sum(r["metrics"]["invalid"] for r in records) == model.invalid

    again = Flaky()
    resumed = study(again, log, resume=True)
    assert again.calls == 0  # every episode was in the log: nothing is replayed
    assert resumed == results


def test_a_study_cut_short_resumes_the_missing_episode_with_invalid_replies(
        tmp_path: Path) -> None:
    log = tmp_path / "dacs.jsonl"
    results = study(Flaky(), log, resume=False)
    lines = log.read_text().splitlines(keepends=True)
    last = max(i for i, line in enumerate(lines) if '"record"' in line)
    call = max(i for i, line in enumerate(lines[:last]) if '"type": "call"' in line)
    # the last episode never finished, and its last call was never answered
    log.write_text("".join(lines[:call]))
    again = Flaky()
    assert study(again, log, resume=True) == results
    assert again.calls == 1  # the calls it had answered are replayed from the log


def test_retry_failed_replays_only_the_provider_error_episodes(tmp_path: Path) -> None:
    """A study whose provider was down for its first arm is finished by --retry-failed:
    the provider_error episodes are played again, the measured ones are not."""
    from diagym.llm_policies.client.transport import ChatResult

    log = tmp_path / "dacs.jsonl"
    model = Flaky()

    def make_policy(outage: list[int]) -> Any:
        """Policies whose provider fails the next outage[0] calls, then answers."""
        def make(_name: str, env: Any) -> LLMPolicy:
            chat = InProcessChat(model)
            real = chat.complete

            def complete(messages: Any) -> ChatResult:
                if outage[0] > 0:
                    outage[0] -= 1
                    return ChatResult(text="", status="error", error="down", http_status=503,
                                      prompt_tokens=None, completion_tokens=None,
                                      latency_s=0.0, retries=0, response_format="none")
                return real(messages)

            chat.complete = complete  # type: ignore[method-assign]
            return LLMPolicy(chat, renderer_for(env))
        return make

    kwargs = {"arms": LLM_ARMS[:1], "episodes": 3, "phases": ("diversity",), "log": log,
              "make_env": text_env}
    first = play_phases(make_policy([2]), **kwargs)  # the first two episodes meet the outage
    failed = [r for r in first if r.unmeasured]
    assert failed, "the outage produced no provider_error episode"
    calls_before = model.calls
    second = play_phases(make_policy([0]), resume=True, retry_failed=True, **kwargs)
    assert all(r.unmeasured == 0 for r in second)
    replayed = model.calls - calls_before
    assert 0 < replayed
    third_model_calls = model.calls
    assert play_phases(make_policy([0]), resume=True, **kwargs) == second
    assert model.calls == third_model_calls  # nothing left to play
