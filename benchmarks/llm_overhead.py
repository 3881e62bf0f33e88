"""What the LLM harness itself costs per decision, against servers that answer at once.

A model call takes seconds; the harness around it (render the prompt, count its cl100k
tokens, build and send the request, parse the answer, step the env, append the call to the
run log) must stay negligible: the target is <= 1 ms per decision. Two zero-latency servers,
side by side in one run, medians of repeats (the machine is shared):
- in-process: httpx.MockTransport answers inside the client (no sockets): the harness alone;
- loopback: a minimal keep-alive HTTP/1.1 server in another process on 127.0.0.1: the harness
  plus one local HTTP round trip and the server's own parsing.
Both answer the same fixed action; the env allows unlimited errors and a TimeLimit ends each
episode after 8 decisions, so every episode has N = 8 decisions with a growing history, as a
real one does. A breakdown times each stage alone.

    python benchmarks/llm_overhead.py [--decisions 400] [--repeats 5] [--json-out FILE]
"""

from __future__ import annotations

import argparse
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

import envs  # noqa: E402,F401
from controllers.rollout import rollout
from controllers.runlog import RunLog  # noqa: E402
from envs._core import tokens  # noqa: E402
from llm_policies.client.transport import ChatClient  # noqa: E402
from llm_policies.policy import LLMPolicy  # noqa: E402
from llm_policies.prompts.workflow import ACTION_SCHEMA, render  # noqa: E402
from llm_policies.text_actions import TextActionWrapper, parse_action  # noqa: E402

N_OPS = 8
ANSWER = json.dumps({"operation": 0, "candidate": 0})
BODY = json.dumps({
    "id": "bench", "object": "chat.completion", "model": "bench",
    "choices": [{"index": 0, "finish_reason": "stop",
                 "message": {"role": "assistant", "content": ANSWER}}],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}).encode()


class _Instant(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as real servers do
    disable_nagle_algorithm = True  # headers and body go out at once, no 40 ms ACK wait

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--decisions", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args(argv)
    episodes = args.decisions // N_OPS

    env = make_env()

    def mock(_request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=BODY, headers={"Content-Type": "application/json"})

    ports: Any = multiprocessing.Queue()
    server = multiprocessing.Process(target=_serve, args=(ports,), daemon=True)
    server.start()
    base_url = f"http://127.0.0.1:{ports.get(timeout=30)}/v1"
    with tempfile.TemporaryDirectory() as tmp:
        clients = {
            "in-process (MockTransport)": make_client("http://bench/v1",
                                                      httpx.MockTransport(mock)),
            "loopback HTTP/1.1 server": make_client(base_url),
        }
        counter = [0]

        def full_run(client: ChatClient) -> Callable[[], int]:
            def run() -> int:
                counter[0] += 1
                policy = LLMPolicy.for_env(client, env)
                log = Path(tmp) / f"run{counter[0]}.jsonl"
                records = rollout(env, policy, episodes, seed=counter[0] * 1000, log=log)
                return sum(int(r.counters["decisions"]) for r in records)
            return run

        # Stage breakdown on one mid-episode decision.
        observation, info = env.reset(seed=1)
        spec = env.unwrapped.params
        history = [{"operation": 0, "candidate": 0, "outcome": "ok", "update": [1, 3]}] * 3
        initial = observation["registers"]

        def render_one() -> Any:
            return render(spec, observation, history, initial=initial)

        prompt_text = render_one().messages[-1]["content"]
        answer = ANSWER
        run_log = RunLog(Path(tmp) / "stage.jsonl", {"bench": True})
        entry = {"type": "call", "prompt": render_one().messages,
                 "response": answer, "latency_s": 0.0}
        stages: dict[str, Callable[[], Any]] = {
            "render (prompt + cl100k count)": render_one,
            "cl100k count of the user turn": lambda: tokens.count(prompt_text),
            "parse answer": lambda: parse_action(answer, spec.n_ops, spec.candidates),
            "append call line to the log": lambda: run_log.write(entry),
        }

        def stage_time(fn: Callable[[], Any], n: int = 300) -> float:
            start = time.perf_counter()
            for _ in range(n):
                fn()
            return (time.perf_counter() - start) / n

        contenders = {name: full_run(client) for name, client in clients.items()}
        for run in contenders.values():
            run()  # warm-up
        totals: dict[str, list[float]] = {name: [] for name in contenders}
        parts: dict[str, list[float]] = {name: [] for name in stages}
        for _ in range(args.repeats):
            for name, run in contenders.items():
                totals[name].append(per_decision(run))
            for name, fn in stages.items():
                parts[name].append(stage_time(fn))
        run_log.close()
    server.terminate()

    result = {
        "repeats": args.repeats,
        "decisions_per_repeat": episodes * N_OPS,
        "ms_per_decision": {k: 1e3 * statistics.median(v) for k, v in totals.items()},
        "stage_ms": {k: 1e3 * statistics.median(v) for k, v in parts.items()},
    }
    print(f"median of {args.repeats} repeats, {episodes * N_OPS} decisions each")
    print(f"{'whole decision (policy + client + env + log)':<46} {'ms':>8}")
    for name, value in result["ms_per_decision"].items():
        print(f"  {name:<44} {value:>8.3f}")
    print("stages alone")
    for name, value in result["stage_ms"].items():
        print(f"  {name:<44} {value:>8.3f}")
    emit(result, args.json_out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
