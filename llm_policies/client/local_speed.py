"""How fast a local model answers on this machine now, and the deadlines that follow from it.

A fixed per-call timeout is wrong both ways on a shared CPU: a quiet machine runs a 1.5B model
faster than a loaded one runs a 270M one, and the capability probe's 10 s deadline called the
Qwen models' tools and schema modes unsupported on a loaded 2-core machine when they only had
not answered yet. So a freshly started server is measured (`measure`), after a one-token
warm-up (a server's first call is slower), with two requests: a
cold prompt of about CALIBRATION_TOKENS tokens answered with one token (prompt evaluation
speed), then the same prompt answered with up to GEN_TOKENS tokens, which the server's reuse of
the last prompt's state leaves mostly to generation (generation speed). The deadlines are
SAFETY times what the measured speeds predict for the largest call, never below a floor:
- a call: the whole context window evaluated cold plus max_tokens generated (a bound on a
  hang, not an expected time: the prompt cache makes most calls far faster);
- a probe request: PROBE_PROMPT_TOKENS evaluated plus the probe's PROBE_MAX_TOKENS.
"""

from __future__ import annotations

import contextlib
import math
import time
import uuid
from dataclasses import dataclass

import httpx

from diagym.llm_policies.client.probe import PROBE_MAX_TOKENS

CALIBRATION_TOKENS = 400  # about this many prompt tokens in the calibration request
GEN_TOKENS = 32
SAFETY = 2.0  # deadline = SAFETY x the predicted time of the largest call
MIN_CALL_TIMEOUT_S = 30.0
MIN_PROBE_TIMEOUT_S = 10.0
PROBE_PROMPT_TOKENS = 512  # the probe's tool request with chatml-function-calling's tool list
# A reply of fewer tokens than this does not measure generation (a model that stops at once, or
# a warm call the server did not reuse the prompt for, was seen to read as 0.1 tokens/s on a
# loaded machine); generation is then taken as no slower per token than GEN_SLOWDOWN_BOUND
# times prompt evaluation (one batch-1 forward pass a token against batched ones: 2x measured
# for the Qwen 0.5B here), which also bounds a measured figure.
MIN_GENERATED = 8
GEN_SLOWDOWN_BOUND = 20.0
MEASURE_TIMEOUT_S = 600.0  # a calibration request that takes longer than this is a hang
FILLER = ("The controller reads the queue, checks each slot, and records what it saw. ")


@dataclass(frozen=True)
class Speed:
    """Measured prompt-evaluation and generation speeds (tokens per second)."""

    prompt_tps: float
    gen_tps: float
    prompt_tokens: int  # of the calibration request
    seconds: float  # the calibration's wall time

    def call_seconds(self, prompt_tokens: int, output_tokens: int) -> float:
        """Predicted seconds for one cold call."""
        return prompt_tokens / self.prompt_tps + output_tokens / self.gen_tps

    def call_timeout(self, n_ctx: int, max_tokens: int) -> float:
        """Per-call timeout: SAFETY x a cold call filling the window, rounded up to 10 s."""
        bound = SAFETY * self.call_seconds(n_ctx, max_tokens)
        return max(MIN_CALL_TIMEOUT_S, 10.0 * math.ceil(bound / 10.0))

    def probe_timeout(self) -> float:
        """Per-request deadline of the capability probe and the pre-flight check."""
        bound = SAFETY * self.call_seconds(PROBE_PROMPT_TOKENS, PROBE_MAX_TOKENS)
        return max(MIN_PROBE_TIMEOUT_S, float(math.ceil(bound)))

    def describe(self) -> str:
        return (f"prompt {self.prompt_tps:.0f} tokens/s, generation {self.gen_tps:.1f} "
                f"tokens/s (measured in {self.seconds:.1f} s)")


def _calibration_prompt() -> str:
    """A prompt of about CALIBRATION_TOKENS tokens that no earlier call shares a prefix with."""
    repeats = CALIBRATION_TOKENS // 15
    return f"[{uuid.uuid4().hex}] " + FILLER * repeats + "Now count from 1 to 50."


def measure(base_url: str, model: str, timeout: float = MEASURE_TIMEOUT_S,
            transport: httpx.BaseTransport | None = None) -> Speed:
    """Time the two calibration requests against an OpenAI-compatible server (module
    docstring). RuntimeError when a request fails or its reply carries no token counts."""
    prompt = _calibration_prompt()
    url = base_url.rstrip("/") + "/chat/completions"

    def ask(max_tokens: int) -> tuple[float, int, int]:
        body = {"model": model, "messages": [{"role": "user", "content": prompt}],
                "max_tokens": max_tokens, "temperature": 0.0}
        start = time.monotonic()
        try:
            reply = http.post(url, json=body)
        except httpx.HTTPError as error:
            raise RuntimeError(f"measuring the local model's speed failed: "
                               f"{type(error).__name__}: {error}") from None
        elapsed = time.monotonic() - start
        if reply.status_code != 200:
            raise RuntimeError(f"measuring the local model's speed failed: HTTP "
                               f"{reply.status_code}")
        try:
            usage = reply.json()["usage"]
            return elapsed, int(usage["prompt_tokens"]), int(usage["completion_tokens"])
        except (ValueError, KeyError, TypeError):
            raise RuntimeError("measuring the local model's speed failed: the reply has no "
                               "usage token counts") from None

    with httpx.Client(timeout=httpx.Timeout(timeout), transport=transport) as http:
        warm_up = {"model": model, "messages": [{"role": "user", "content": "Hi."}],
                   "max_tokens": 1}
        with contextlib.suppress(httpx.HTTPError):  # a server's first call is slower
            http.post(url, json=warm_up)
        cold_s, prompt_tokens, _ = ask(1)
        warm_s, _, generated = ask(GEN_TOKENS)
    timed = generated >= MIN_GENERATED
    measured_gen = generated / max(warm_s, 1e-3) if timed else 0.0
    prompt_s = max(cold_s - (1.0 / measured_gen if timed else 0.0), 1e-3)
    prompt_tps = prompt_tokens / prompt_s
    gen_tps = measured_gen
    return Speed(prompt_tps=prompt_tps, gen_tps=max(gen_tps, prompt_tps / GEN_SLOWDOWN_BOUND),
                 prompt_tokens=prompt_tokens, seconds=cold_s + warm_s)
