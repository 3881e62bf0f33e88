"""The TRL environment (analysis/integrations/trl_env.py): the episode it plays, the tool
schema TRL builds from it, and a GRPO step of TRL's own trainer over it.

The GRPO step runs TRL's GRPOTrainer unmodified (its prompt rendering with the Qwen chat
template, its response parser, its tool loop, the reward from `get_reward`, the loss and an
optimizer step) on a tiny randomly initialised Qwen2 model whose `generate` is scripted: a
random model never writes a tool call, so the rollouts would test nothing. The script is a
positive control that reads only the text TRL renders: in each group one completion plays
diagym's text oracle (llm_policies/oracle.py, which decides from the messages alone) and
must solve the task, the other sends candidate=2018 and must score invalid_action; so the
rewards are [1, 0] per group, the advantage is not zero and the step moves the weights.
The tokenizer and chat template are the bundled Qwen2.5-Coder 0.5B GGUF's (`make
fetch-qwen`), read by transformers' GGUF loader; the test skips, saying so, without them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import diagym  # noqa: F401  (registers the ids)
from diagym.analysis.diagnose.battery import DEFAULT_BATTERY, DEFAULT_SHARES, allocate
from diagym.analysis.diagnose.run import env_kwargs
from diagym.analysis.integrations.trl_env import (
    EPISODE_OVER,
    WorkflowToolEnv,
    battery_dataset,
    workflow_dataset,
)
from diagym.llm_policies.client.local_server import QWEN_05B
from diagym.llm_policies.client.split_weights import cached_path
from diagym.llm_policies.oracle import WorkflowOracle
from diagym.llm_policies.text_actions import INVALID_ACTION, INVALID_ARGUMENTS, NO_TOOL_CALL
from tests.conftest import play_oracle

SMALL = {"n_ops": 3, "depth": 3}  # three operations keep a scripted rollout short


def test_the_exact_controller_solves_the_episode_and_is_told_it_is_over() -> None:
    env = WorkflowToolEnv()
    opening = env.reset(task_seed=3, env_kwargs=json.dumps(SMALL), prompt=[])
    assert opening.startswith("You control a stateful workflow")
    assert "execute(operation, candidate)" in opening and "op 2: after" in opening
    info, total, actions = play_oracle(gym.make("StatefulWorkflow-v0", **SMALL), 3)
    assert info["success"] and total == pytest.approx(1.0)
    texts = [env.execute(*action) for action in actions]
    assert all(EPISODE_OVER not in text for text in texts[:-1])
    assert texts[-1].splitlines()[-1].startswith(f"{EPISODE_OVER}: the task is solved")
    assert env.get_reward() == pytest.approx(total)
    record = env.record
    assert (record.success, record.completed, record.calls, record.first_failure,
            record.task_seed) == (True, 3, len(actions), None, 3)
    with pytest.raises(ValueError, match=f"^{EPISODE_OVER}: no further call"):
        env.execute(*actions[0])


@pytest.mark.parametrize(("arguments", "category"), [
    ((0, 2018), INVALID_ACTION),
    ((0, "1"), INVALID_ARGUMENTS),
    ((True, 0), INVALID_ARGUMENTS),
])
def test_a_call_the_env_cannot_execute_ends_the_episode_by_diagyms_rule(
        arguments: tuple[Any, Any], category: str) -> None:
    env = WorkflowToolEnv(**SMALL)
    env.reset(task_seed=3)
    text = env.execute(*arguments)
    assert text.startswith(f"That call was {category}:")
    assert text.splitlines()[-1].startswith(f"{EPISODE_OVER}: the task is not solved "
                                            f"(first failure: {category})")
    assert env.get_reward() == 0.0
    assert (env.record.first_failure, env.record.calls, env.record.completed) == (category, 1, 0)


def test_a_rollout_that_stops_calling_ends_as_no_tool_call() -> None:
    env = WorkflowToolEnv(**SMALL)
    env.reset(task_seed=3)
    assert env.get_reward() == 0.0
    assert (env.record.first_failure, env.record.calls) == (NO_TOOL_CALL, 0)


def test_a_row_without_a_seed_moves_to_the_next_task() -> None:
    env = WorkflowToolEnv()
    first = env.reset(task_seed=11)
    second = env.reset()
    assert first != second
    third = WorkflowToolEnv()
    assert third.reset(task_seed=11) == first


def test_a_row_naming_another_family_is_refused() -> None:
    with pytest.raises(ValueError, match="^env_id must be a StatefulWorkflow id"):
        WorkflowToolEnv().reset(env_id="DACSSteering-v0", task_seed=0)


def test_the_tool_schema_trl_builds_names_both_integer_arguments() -> None:
    get_json_schema = pytest.importorskip("transformers.utils").get_json_schema
    schema = get_json_schema(WorkflowToolEnv().execute)["function"]
    assert schema["name"] == "execute"
    assert schema["parameters"]["required"] == ["operation", "candidate"]
    for name in ("operation", "candidate"):
        assert schema["parameters"]["properties"][name]["type"] == "integer"
        assert schema["parameters"]["properties"][name]["description"]


def test_the_datasets_hold_configurations_by_seeds_and_the_battery_split() -> None:
    pytest.importorskip("datasets")
    rows = workflow_dataset([{}, {"width": 4}], episodes=2, seed=5)
    assert rows["task_seed"] == [5, 6, 5, 6]
    assert [json.loads(text) for text in rows["env_kwargs"]] == [{}, {}, {"width": 4},
                                                                 {"width": 4}]
    battery = battery_dataset(64)
    allocation = allocate(DEFAULT_SHARES, 64)
    expected = [json.dumps(env_kwargs(spec), sort_keys=True)
                for spec, n in zip(DEFAULT_BATTERY, allocation, strict=True) for _ in range(n)]
    assert battery["env_kwargs"] == expected
    with pytest.raises(ValueError, match="^depth must be"):
        workflow_dataset([{"n_ops": 3}])


# -- a GRPO step of TRL's trainer ---------------------------------------------------------------

_TURN = re.compile(r"<\|im_start\|>(\w+)\n(.*?)(?:<\|im_end\|>|$)", re.S)
_RESPONSE = re.compile(r"<tool_response>\n(.*?)\n</tool_response>", re.S)


def messages_of(text: str) -> list[dict[str, str]]:
    """The chat messages of a prompt rendered with Qwen2.5's template, tool results as tool
    messages: what the oracle reads, message by message."""
    messages = []
    for role, body in _TURN.findall(text):
        responses = _RESPONSE.findall(body)
        if role == "user" and responses:
            messages += [{"role": "tool", "content": part} for part in responses]
        else:
            messages.append({"role": role, "content": body.strip()})
    return messages


def scripted_reply(messages: list[dict[str, str]], row: int) -> str:
    """The completion for one prompt: after the episode ended, plain text; on an odd row's
    first turn, candidate=2018; otherwise the oracle's answer as a Qwen tool call."""
    told = [m["content"] for m in messages if m["role"] == "tool"]
    if any(EPISODE_OVER in text for text in told):
        return "Done."
    answer = ({"operation": 0, "candidate": 2018} if not told and row % 2 else
              json.loads(WorkflowOracle()(messages)))
    return ("<tool_call>\n" + json.dumps({"name": "execute", "arguments": answer})
            + "\n</tool_call>")


@pytest.fixture(scope="module")
def qwen_tokenizer() -> Any:
    pytest.importorskip("trl", reason="trl is not installed (pip install 'diagym[trl]')")
    pytest.importorskip("gguf", reason="gguf is not installed (pip install 'diagym[trl]')")
    path = cached_path(QWEN_05B)
    if not path.is_file():
        pytest.skip(f"the Qwen 0.5B GGUF (its tokenizer and chat template) is not at {path} "
                    "(make fetch-qwen)")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)


@pytest.mark.timeout(900)
def test_a_grpo_step_plays_the_environment_and_moves_the_weights(
        qwen_tokenizer: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM
    from trl import GRPOConfig, GRPOTrainer

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    tokenizer = qwen_tokenizer

    class ScriptedQwen(Qwen2ForCausalLM):
        def generate(self, input_ids: Any = None, attention_mask: Any = None,
                     **_: Any) -> Any:
            replies = []
            for row, (ids, mask) in enumerate(zip(input_ids, attention_mask, strict=True)):
                text = tokenizer.decode(ids[mask.bool()], skip_special_tokens=False)
                reply = scripted_reply(messages_of(text), row) + tokenizer.eos_token
                replies.append(tokenizer.encode(reply, add_special_tokens=False))
            width = max(map(len, replies))
            pad = [tokenizer.pad_token_id]
            tail = torch.tensor([ids + pad * (width - len(ids)) for ids in replies])
            return torch.cat([input_ids, tail], dim=1)

    torch.manual_seed(0)
    model = ScriptedQwen(Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id))
    before = {name: value.detach().clone() for name, value in model.named_parameters()}
    played: list[WorkflowToolEnv] = []

    def factory() -> WorkflowToolEnv:
        played.append(WorkflowToolEnv())
        return played[-1]

    args = GRPOConfig(output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=2,
                      num_generations=2, max_completion_length=2048, learning_rate=1e-2,
                      beta=0.0, logging_steps=1, report_to=[], use_cpu=True,
                      save_strategy="no", shuffle_dataset=False)
    trainer = GRPOTrainer(model=model, args=args, processing_class=tokenizer,
                          train_dataset=workflow_dataset([SMALL], episodes=1, seed=3),
                          environment_factory=factory)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # two cores shared by the suite's workers: no spinning threads
    try:
        trainer.train()
    finally:
        torch.set_num_threads(threads)

    records = [env.record for env in played if env.record is not None]
    assert [(r.task_seed, r.success, r.first_failure) for r in records] == [
        (3, True, None), (3, False, INVALID_ACTION)]
    _, total, actions = play_oracle(gym.make("StatefulWorkflow-v0", **SMALL), 3)
    assert records[0].calls == len(actions) and records[0].episode_return == pytest.approx(total)
    logged = trainer.state.log_history[0]
    assert logged["rewards/WorkflowToolEnv/mean"] == pytest.approx(0.5)
    assert logged["tools/failure_frequency"] == 0.0
    moved = [name for name, value in model.named_parameters()
             if not torch.equal(value.detach(), before[name])]
    assert moved, "the GRPO step left every weight as it was"
