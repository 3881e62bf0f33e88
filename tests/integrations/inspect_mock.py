"""Run one inspect eval of a diagym task under inspect's mock model, as a script in its own
process (tests/integrations/test_inspect.py).

Why a process of its own, started outside the repository: inspect names a package's tasks
(diagym/...) by the installed distribution's metadata, and from the repository's root the
build's diagym.egg-info, which has no record of the editable install, would be found first.

    python inspect_mock.py TASK LOG_DIR OUTPUTS TASK_ARGS_JSON

OUTPUTS is a JSON list of [function, arguments] tool calls played in order, or "oracle": the
env family's text oracle (diagym.llm_policies.oracle) answering every call. Prints the eval
log's path.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from inspect_ai import eval as inspect_eval
from inspect_ai.model import ModelOutput, ModelUsage, get_model

from diagym.llm_policies.oracle import DacsOracle, InProcessChat, WorkflowOracle

MOCK = "mockllm/model"


def tool_output(name: str, arguments: dict[str, Any]) -> ModelOutput:
    """A tool call with its usage given, so the mock model counts no tokens (its own count
    needs a tiktoken file from the network)."""
    output = ModelOutput.for_tool_call(MOCK, name, arguments)
    output.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    return output


def oracle_model(oracle: Any) -> Any:
    """The mock model answering as diagym's text oracle: inspect's messages and tools in
    OpenAI form in, the oracle's tool call out."""
    chat = InProcessChat(oracle)

    def respond(messages: Any, tools: Any, _choice: Any, _config: Any) -> ModelOutput:
        sent = [{"role": m.role, "content": m.text} for m in messages]
        functions = [{"type": "function", "function": {
            "name": t.name, "description": t.description,
            "parameters": t.parameters.model_dump(exclude_none=True)}} for t in tools]
        (call,) = chat.complete(sent, tools=functions).tool_calls
        return tool_output(call.name, json.loads(call.arguments))

    return respond


def main(task: str, log_dir: str, outputs: str, task_args: str) -> None:
    args = json.loads(task_args)
    if outputs == "oracle":
        dacs = args.get("env") == "DACSSteering-v0"
        custom: Any = oracle_model(DacsOracle() if dacs else WorkflowOracle())
    else:
        custom = [tool_output(name, arguments) for name, arguments in json.loads(outputs)]
    (log,) = inspect_eval(task, model=get_model(MOCK, custom_outputs=custom), task_args=args,
                          log_dir=log_dir, display="none")
    print(log.location)


if __name__ == "__main__":
    main(*sys.argv[1:])
