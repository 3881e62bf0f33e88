"""What the LLM harness itself costs per decision, against servers that answer at once.

A model call takes seconds; the harness around it (render the prompt, count its cl100k
tokens, build and send the request, parse the answer, step the env, append the call to the
run log) must stay negligible: the target is <= 1 ms per decision in every harness (json: one
prompt per decision; chat: the episode as one conversation; tools: the conversation with the
action as a native tool call), met when the in-process figure is. Each harness against two
zero-latency servers, all side by side in one run, medians of repeats (the machine is shared):
- in-process: httpx.MockTransport answers inside the client (no sockets): the harness alone;
- loopback: a minimal keep-alive HTTP/1.1 server in another process on 127.0.0.1: the harness
  plus one local HTTP round trip and the server's own parsing.
Both answer the same fixed action, as text, or as a call of the request's tool when it has
"tools" (the tool that takes the action's keys, with a fresh call id each time, as a provider's
ids are); the env allows unlimited errors and a TimeLimit ends each episode after 8 decisions,
so every episode has N = 8 decisions with a growing history or conversation, as a real one
does. A breakdown times each stage of a json decision alone.

    python benchmarks/llm_overhead.py [--decisions 400] [--repeats 5] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import gymnasium as gym
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _output import emit  # noqa: E402

from diagym import envs  # noqa: E402,F401
from diagym.controllers.rollout import rollout
from diagym.controllers.runlog import RunLog  # noqa: E402
from diagym.envs._core import tokens  # noqa: E402
from diagym.llm_policies.client.transport import ChatClient  # noqa: E402
from diagym.llm_policies.harness import HARNESSES  # noqa: E402  (every harness the CLI takes)
from diagym.llm_policies.policy import LLMPolicy  # noqa: E402
from diagym.llm_policies.prompts.workflow import ACTION_SCHEMA, render  # noqa: E402
from diagym.llm_policies.text_actions import TextActionWrapper, parse_action  # noqa: E402

N_OPS = 8
GOAL_MS = 1.0  # per decision, the harness alone (in-process)
ANSWER = json.dumps({"operation": 0, "candidate": 0})
USAGE = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}


def _completion(message: dict[str, Any], finish_reason: str) -> bytes:
    return json.dumps({
        "id": "bench", "object": "chat.completion", "model": "bench",
        "choices": [{"index": 0, "finish_reason": finish_reason, "message": message}],
        "usage": USAGE,
    }).encode()


BODY = _completion({"role": "assistant", "content": ANSWER}, "stop")
CALL_ID = "__CALL_ID__"


class Answers:
    """The zero-latency model of both servers: the fixed action as text, or, when the
    request has "tools", as one call of the tool whose parameters are the action's keys. The
    request is parsed only for a tool list not seen before (the list is the request's tail,
    after the messages), so a server's parsing of a growing conversation is not timed as the
    harness's; only the call id changes between answers."""

    def __init__(self) -> None:
        self._calls = itertools.count(1)
        self._tool_bodies: dict[bytes, bytes] = {}

    def body(self, request: bytes) -> bytes:
        at = request.rfind(b'"tools"')
        if at < 0:
            return BODY
        tail = request[at:]
        if tail not in self._tool_bodies:
            tools = [t["function"] for t in json.loads(request).get("tools") or ()]
            keys = set(json.loads(ANSWER))
            name = next((t["name"] for t in tools
                         if keys <= set(t.get("parameters", {}).get("properties", {}))),
                        tools[0]["name"] if tools else "")
            self._tool_bodies[tail] = _completion({
                "role": "assistant", "content": None,
                "tool_calls": [{"id": CALL_ID, "type": "function",
                                "function": {"name": name, "arguments": ANSWER}}]},
                "tool_calls")
        call_id = f"call_{next(self._calls)}".encode()
        return self._tool_bodies[tail].replace(CALL_ID.encode(), call_id)


class _Instant(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as real servers do
    disable_nagle_algorithm = True  # headers and body go out at once, no 40 ms ACK wait
    answers = Answers()

    def do_POST(self) -> None:
        body = self.answers.body(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _serve(port_queue: Any) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Instant)
    port_queue.put(server.server_address[1])
    server.serve_forever()


def make_env() -> gym.Env:
    inner = gym.make("StatefulWorkflow-v0", error_allowance=10**6)
    return TextActionWrapper(gym.wrappers.TimeLimit(inner, max_episode_steps=N_OPS))


def make_client(base_url: str, transport: httpx.BaseTransport | None = None) -> ChatClient:
    return ChatClient(base_url=base_url, model="bench", json_schema=ACTION_SCHEMA,
                      response_format="json_schema", transport=transport)


def per_decision(run: Callable[[], int]) -> float:
    start = time.perf_counter()
    decisions = run()
    return (time.perf_counter() - start) / decisions


def decision_stages(env: Any, run_log: RunLog) -> dict[str, Callable[[], Any]]:
    """The stages of one mid-episode json decision, each a call to time on its own."""
    observation, _ = env.reset(seed=1)
    spec = env.unwrapped.params
    history = [{"operation": 0, "candidate": 0, "outcome": "ok", "update": [1, 3]}] * 3
    initial = observation["registers"]

    def render_one() -> Any:
        return render(spec, observation, history, initial=initial)

    prompt_text = render_one().messages[-1]["content"]
    answer = ANSWER
    entry = {"type": "call", "prompt": render_one().messages,
             "response": answer, "latency_s": 0.0}
    return {
        "render (prompt + cl100k count)": render_one,
        "cl100k count of the user turn": lambda: tokens.count(prompt_text),
        "parse answer": lambda: parse_action(answer, spec.n_ops, spec.candidates),
        "append call line to the log": lambda: run_log.write(entry),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--decisions", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args(argv)
    episodes = args.decisions // N_OPS

    env = make_env()
    answers = Answers()

    def mock(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=answers.body(request.content),
                              headers={"Content-Type": "application/json"})

    ports: Any = multiprocessing.Queue()
    server = multiprocessing.Process(target=_serve, args=(ports,), daemon=True)
    server.start()
    base_url = f"http://127.0.0.1:{ports.get(timeout=30)}/v1"
    servers = ("in-process (MockTransport)", "loopback HTTP/1.1 server")
    with tempfile.TemporaryDirectory() as tmp:
        clients = {
            servers[0]: make_client("http://bench/v1", httpx.MockTransport(mock)),
            servers[1]: make_client(base_url),
        }
        counter = [0]

        def full_run(client: ChatClient, harness: str) -> Callable[[], int]:
            def run() -> int:
                counter[0] += 1
                policy = LLMPolicy.for_env(client, env, harness=harness)
                log = Path(tmp) / f"run{counter[0]}.jsonl"
                records = rollout(env, policy, episodes, seed=counter[0] * 1000, log=log)
                decisions = sum(int(r.counters["decisions"]) for r in records)
                if sum(int(r.counters["schema_valid"]) for r in records) != decisions:
                    raise RuntimeError(f"harness {harness}: a fixed answer was not well formed; "
                                       "the figure would time failures")
                return decisions
            return run

        run_log = RunLog(Path(tmp) / "stage.jsonl", {"bench": True})
        stages = decision_stages(env, run_log)

        def stage_time(fn: Callable[[], Any], n: int = 300) -> float:
            start = time.perf_counter()
            for _ in range(n):
                fn()
            return (time.perf_counter() - start) / n

        contenders = {(harness, name): full_run(client, harness)
                      for harness in HARNESSES for name, client in clients.items()}
        for run in contenders.values():
            run()  # warm-up
        totals: dict[tuple[str, str], list[float]] = {key: [] for key in contenders}
        parts: dict[str, list[float]] = {name: [] for name in stages}
        for _ in range(args.repeats):
            for key, run in contenders.items():
                totals[key].append(per_decision(run))
            for name, fn in stages.items():
                parts[name].append(stage_time(fn))
        run_log.close()
    server.terminate()

    ms = {harness: {name: 1e3 * statistics.median(totals[harness, name]) for name in servers}
          for harness in HARNESSES}
    result = {
        "repeats": args.repeats,
        "decisions_per_repeat": episodes * N_OPS,
        "goal_ms_per_decision": GOAL_MS,
        "ms_per_decision": ms,
        "ratio_to_json": {harness: {name: ms[harness][name] / ms["json"][name]
                                    for name in servers} for harness in HARNESSES},
        "goal_met": {harness: ms[harness][servers[0]] <= GOAL_MS for harness in HARNESSES},
        "stage_ms": {k: 1e3 * statistics.median(v) for k, v in parts.items()},
    }
    print_table(result, servers)
    emit(result, args.json_out)
    return 0


def print_table(result: dict[str, Any], servers: tuple[str, str]) -> None:
    """The measured medians as a table: per harness the whole decision on each server and
    its ratios, then the stages of a json decision."""
    ms = result["ms_per_decision"]
    print(f"median of {result['repeats']} repeats, {result['decisions_per_repeat']} decisions "
          f"each; goal: the harness alone (in-process) <= {GOAL_MS:g} ms per decision")
    print("whole decision (policy + client + env + log), ms")
    print(f"  {'harness':<8} {'in-process':>11} {'loopback':>9} {'loop/in':>8} "
          f"{'in / json':>10} {'loop / json':>12}  goal")
    for harness in HARNESSES:
        inside, loop = (ms[harness][name] for name in servers)
        ratios = result["ratio_to_json"][harness]
        print(f"  {harness:<8} {inside:>11.3f} {loop:>9.3f} {loop / inside:>8.2f} "
              f"{ratios[servers[0]]:>10.2f} {ratios[servers[1]]:>12.2f}  "
              + ("met" if result["goal_met"][harness] else "missed"))
    print("stages of a json decision alone, ms")
    for name, value in result["stage_ms"].items():
        print(f"  {name:<44} {value:>8.3f}")


if __name__ == "__main__":
    raise SystemExit(main())
