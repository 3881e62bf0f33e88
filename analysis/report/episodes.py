"""The trace viewer's data: every episode of the logs as one compact row, and the decisions of
the first episodes in full, all under stated byte caps.

Why bounded this way: a run of a reference controller can hold millions of episodes and a
chat model's prompts are kilobytes each, while the report must stay one file a browser opens
at once. So each episode is a row of small integers (about 30 bytes) and at most
LISTED_EPISODES are listed; the decisions (observation, prompt, reply, action, outcome,
attribution) are kept for the first episodes until DETAILED_EPISODES or DETAIL_BYTES is
reached, each prompt cut to PROMPT_BYTES and each reply to REPLY_BYTES (head and tail kept,
the cut stated in the text), and an episode's decisions stop at EPISODE_BYTES. For the first
FRAMES failed StatefulWorkflow episodes (FRAME_BYTES in all) the state before the first failed
call is also drawn, as `render_mode="rgb_array"` draws it (envs/workflow/viewer.py). The viewer
(viewer.js) renders one page of rows at a time from this data, never the whole list.

Where the decisions come from: the "call" lines of a chat model carry the prompt and reply;
a StatefulWorkflow episode with a "trace" line (controllers/tracing.py), or whose executed
calls can be decoded from its call lines (analysis/diagnose/run.py `logged_traces`), is
replayed on the env from its public task and actions (analysis/diagnose/attribution.py
`replay`), which gives each decision's observation, outcome and attribution. A reference
controller's log holds outcomes only; the controllers are deterministic given the task seed,
so its detailed episodes are played again by the same controller and shown only when the
replay reproduces the logged outcome (success, completed, calls, errors); otherwise the row
says so and shows no decisions.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import gymnasium as gym

from diagym import envs
from diagym.analysis.diagnose.attribution import Trace, attribute, replay
from diagym.analysis.report.logs import LogRun
from diagym.controllers.logreader import prompt_of
from diagym.envs.workflow.layout import FAILURE_NAMES
from diagym.envs.workflow.text import describe_observation, describe_task

LISTED_EPISODES = 20_000
DETAILED_EPISODES = 300
DETAIL_BYTES = 3_000_000
EPISODE_BYTES = 40_000
PROMPT_BYTES = 4_000
REPLY_BYTES = 1_500
FRAMES = 10            # pictures of the state before an episode's first failed call
FRAME_BYTES = 800_000  # base64 bytes of those pictures in all
COLUMNS = ("run", "seed", "success", "failure", "completed", "calls", "errors", "detail")


def clip(text: str, limit: int) -> str:
    """`text` within `limit` UTF-8 bytes: its head and tail around a line saying how many
    bytes were cut (the tail is longer: a conversation's latest turn is at its end)."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    head, tail = limit // 3, limit - limit // 3
    cut = len(data) - head - tail
    return (data[:head].decode("utf-8", "ignore") + f"\n[... {cut:,} bytes cut ...]\n"
            + data[-tail:].decode("utf-8", "ignore"))


def _prompt_text(prompt: Any) -> str:
    if isinstance(prompt, list):
        parts = []
        for message in prompt:
            if isinstance(message, Mapping):
                content = message.get("content")
                if not isinstance(content, str):
                    content = json.dumps(content if content is not None
                                         else message.get("tool_calls"), sort_keys=True)
                parts.append(f"[{message.get('role', '?')}]\n{content}")
        return "\n\n".join(parts)
    return "" if prompt is None else str(prompt)


def _reply_text(call: Mapping[str, Any]) -> str:
    tool_calls = call.get("tool_calls") or []
    reply = call.get("response")
    text = reply if isinstance(reply, str) else ""
    if isinstance(call.get("reasoning"), str) and call["reasoning"]:
        text = f"reasoning: {call['reasoning']}\n" + text
    if tool_calls:
        text += ("\n" if text else "") + "tool calls: " + json.dumps(tool_calls, sort_keys=True)
    if call.get("error"):
        text += ("\n" if text else "") + f"error: {call['error']}"
    return text


def _call_meta(call: Mapping[str, Any]) -> str:
    parts = [f"harness {call.get('harness')}"] if call.get("harness") else []
    latency = call.get("latency_s")
    answered = {"log": "replayed from the run log after a resume (no call made)",
                "hit": "answered from the response cache (no call made)"}
    if call.get("cache") in answered:  # its latency 0 s measured no model
        parts.append(answered[call["cache"]])
    elif isinstance(latency, int | float):
        parts.append(f"latency {latency:.3f} s")
    tokens = call.get("provider_prompt_tokens") or call.get("cl100k_prompt_tokens")
    if tokens:
        parts.append(f"prompt {tokens} tokens")
    if isinstance(call.get("cl100k_reasoning_tokens"), int):  # a think-then-act call
        parts.append(f"reasoning {call['cl100k_reasoning_tokens']} tokens, answer "
                     f"{call.get('cl100k_answer_tokens')} tokens")
    if call.get("retries"):
        parts.append(f"{call['retries']} retries")
    if isinstance(call.get("cost_usd"), int | float):
        parts.append(f"${call['cost_usd']:.5f}")
    return ", ".join(parts)


def _observation_text(observation: Mapping[str, Any]) -> str:
    failure = FAILURE_NAMES[int(observation["failure"])]
    return (describe_observation(observation)
            + f"\nlast failure: {failure or 'none'}; errors: {int(observation['errors'])}")


class _Replayer:
    """Replays a workflow run's episodes from public data (one env per run for the task)."""

    def __init__(self, run: LogRun) -> None:
        self.run = run
        self.kwargs = dict(run.run.get("env_kwargs") or {})
        self.env = gym.make(str(run.run["env"]), **self.kwargs)
        from diagym.analysis.diagnose.run import logged_traces
        from diagym.envs.workflow.params import WorkflowParams

        self.traces = logged_traces(WorkflowParams.from_kwargs(**self.kwargs), run.logged)
        self.viewer: Any = None
        self.decisions_of: dict[int, list[Any]] = {}

    def task(self, seed: int) -> str:
        self.env.reset(seed=seed)
        return describe_task(self.env.unwrapped.task)

    def _controller_actions(self, seed: int) -> tuple[tuple[int, int], ...] | None:
        """A reference controller's actions on `seed`, played again (module docstring)."""
        from diagym.controllers.workflow.adapter import ReferencePolicy

        policy = self.run.run.get("policy")
        if not (isinstance(policy, Mapping) and set(policy) == {"controller"}):
            return None
        try:
            player = ReferencePolicy.for_env(str(policy["controller"]), self.env)
        except (ValueError, KeyError):
            return None
        player.reset(seed=seed)
        observation, info = self.env.reset(seed=seed)
        actions, ended = [], False
        while not ended:
            action = player.act(observation, info)
            actions.append((int(action[0]), int(action[1])))
            observation, _, ended, truncated, info = self.env.step(action)
            ended = ended or truncated
        return tuple(actions)

    def decisions(self, seed: int, record: Any) -> tuple[list[dict[str, Any]] | None, str]:
        """The replayed decisions of the episode, and a note on where they came from (for a
        trace line with outcomes, whether the replay gives the same: `outcome_check`)."""
        actions = self.traces.get(seed)
        if actions is not None:
            rows = self._replay(seed, actions)
            traced = self.run.logged.outcomes.get(seed)
            return rows, ("" if traced is None
                          else outcome_check(traced, [row["outcome"] for row in rows]))
        actions = self._controller_actions(seed)
        if actions is None:
            return None, ""
        rows = self._replay(seed, actions)
        done = sum(r["outcome"] == "ok" for r in rows)
        outcome = (done == self.env.unwrapped.params.n_ops, done, len(rows), len(rows) - done)
        logged = (record.success, record.completed, record.calls, record.errors)
        if outcome != logged:
            return None, ("the controller played again did not reproduce the logged "
                          f"outcome (success, completed, calls, errors: {logged} logged, "
                          f"{outcome} replayed); no decisions shown")
        return rows, "decisions played again by the same reference controller"

    def frame(self, seed: int, rows: list[dict[str, Any]]) -> str:
        """The rgb_array picture (envs/workflow/viewer.py) of the state before the first
        failed decision of the episode just replayed (`rows`), as a PNG in base64."""
        first = next(i for i, row in enumerate(rows) if row["outcome"] != "ok")
        import base64
        import io

        from matplotlib.image import imsave

        from diagym.envs.workflow.viewer import WorkflowViewer

        if self.viewer is None:
            self.viewer = WorkflowViewer()
        self.env.reset(seed=seed)
        decision = self.decisions_of[seed][first]
        picture = self.viewer.render(self.env.unwrapped.params, self.env.unwrapped.task,
                                     decision.observation)
        buffer = io.BytesIO()
        imsave(buffer, picture, format="png")
        return base64.b64encode(buffer.getvalue()).decode("ascii")

    def _replay(self, seed: int, actions: Sequence[tuple[int, int]]) -> list[dict[str, Any]]:
        rows = []
        decisions = replay(Trace(self.kwargs, seed, tuple(actions)))
        self.decisions_of = {seed: decisions}
        for decision in decisions:
            attribution = attribute(decision)
            op, slot = decision.action
            weights = ", ".join(f"{name} {share:.2f}"
                                for name, share in attribution.weights.items())
            rows.append({"obs": _observation_text(decision.observation),
                         "action": f"execute(v={op}, a={slot})",
                         "outcome": decision.failure or "ok",
                         "attribution": attribution.category + (
                             f" (likelihood shares: {weights})" if weights else "")})
        return rows

    def close(self) -> None:
        self.env.close()
        if self.viewer is not None:
            self.viewer.close()


def outcome_check(traced: Sequence[str], replayed: Sequence[str]) -> str:
    """The note on an episode whose trace line holds outcomes (controllers/tracing.py): that
    the replay gives the same, or the first decision where it does not (then the env the
    page replays on is not the one the run played, or the run was not what its log says)."""
    for index, (was, now) in enumerate(zip(traced, replayed, strict=False)):
        if was != now:
            return (f"the traced outcomes disagree with the replay: decision {index} traced "
                    f"{was}, replayed {now}")
    if len(traced) != len(replayed):
        return (f"the traced outcomes disagree with the replay: {len(traced)} traced, "
                f"{len(replayed)} replayed")
    return "outcomes as traced, and the replay gives the same"


def _traced_rows(run: LogRun, seed: int) -> list[dict[str, Any]]:
    """An episode's decisions as its trace line holds them, for an env the page does not
    replay (DACSSteering): each answer, its outcome ("ok" for a correct one, the env's
    failure name, "wrong", otherwise) and its observation's digest; "not traced" for a
    trace line written before outcomes were traced."""
    actions = run.logged.actions.get(seed) or []
    outcomes = run.logged.outcomes.get(seed) or []
    digests = run.logged.observations.get(seed) or []
    rows = []
    for index, action in enumerate(actions):
        values = action if isinstance(action, list) else [action]
        shown = (f"option {values[0]}" if len(values) == 1
                 else "(" + ", ".join(str(v) for v in values) + ")")
        rows.append({"obs": (f"observation digest {digests[index]}" if index < len(digests)
                             else ""),
                     "action": shown,
                     "outcome": outcomes[index] if index < len(outcomes) else "not traced",
                     "attribution": ""})
    return rows


def _merge(replayed: list[dict[str, Any]] | None, calls: list[dict[str, Any]],
           prompt: Callable[[dict[str, Any]], Any]) -> Iterator[dict[str, Any]]:
    """One row per model call (the executed ones matched in order to the replayed
    decisions, the prompt read back by `prompt`), or the replayed decisions alone for a
    policy without calls; made as they are taken, so rows past an episode's cap are never
    read."""
    if not calls:
        yield from replayed or []
        return
    executed = iter(replayed or [])
    for call in sorted(calls, key=lambda c: (int(c.get("decision", 0) or 0),
                                             int(c.get("invalid_retry", 0) or 0))):
        status = call.get("action_status") or call.get("status")
        row = next(executed, {}) if status == "ok" and replayed else {}
        yield {
            "obs": row.get("obs", ""),
            "action": row.get("action", "(executed)" if status == "ok" else "(not executed)"),
            "outcome": row.get("outcome", str(status)),
            "attribution": row.get("attribution", ""),
            "prompt": clip(_prompt_text(prompt(call)), PROMPT_BYTES),
            "reply": clip(_reply_text(call), REPLY_BYTES),
            "meta": _call_meta(call),
        }


def _bounded(rows: Iterator[dict[str, Any]], total: int) -> tuple[list[dict[str, Any]], str]:
    """The first of `total` rows within EPISODE_BYTES, and the note saying how many."""
    kept, size = [], 0
    for row in rows:
        size += len(json.dumps(row).encode())
        if size > EPISODE_BYTES and kept:
            return kept, (f"{len(kept)} of {total} decisions shown (cap "
                          f"{EPISODE_BYTES:,} bytes per episode)")
        kept.append(row)
    return kept, ""


def _detail(run: LogRun, seed: Any, record: Any, calls: list[dict[str, Any]],
            replayer: _Replayer | None, framed: bool) -> dict[str, Any]:
    """One episode's detail entry: its task and decisions (replayed when `replayer`, a
    workflow run's, is given, merged with its calls, bounded), and, when `framed`, the
    picture at its first failed executed call."""
    replayed, task, note = None, None, ""
    if replayer is not None:
        task = replayer.task(seed)
        try:
            replayed, note = replayer.decisions(seed, record)
        except ValueError as error:
            note = f"replay failed: {error}"
    elif not calls and seed in run.logged.actions:
        replayed = _traced_rows(run, seed)
        note = ("decisions as traced, not replayed" if seed in run.logged.outcomes
                else "actions as traced, without outcomes (an older trace line)")
    decisions, cut = _bounded(_merge(replayed, calls, lambda call: prompt_of(run.logged, call)),
                              len(calls) if calls else len(replayed or []))
    frame = None
    # the row of the first failed executed call (rows of unexecuted replies have no
    # observation), among the rows kept
    failed = next((i for i, row in enumerate(decisions)
                   if row["outcome"] != "ok" and row["obs"]), None)
    if replayer is not None and failed is not None and framed:
        frame = {"decision": failed, "png": replayer.frame(seed, replayed)}
    if not decisions and not note:
        note = ("no decisions recorded: the log holds this episode's outcome only (a trace "
                "line or call lines give its decisions)")
    return {"key": run.key(seed), "task": task, "decisions": decisions, "frame": frame,
            "note": "; ".join(n for n in (note, cut) if n)}


def viewer_data(runs: Sequence[LogRun]) -> dict[str, Any]:
    """The viewer's JSON (module docstring): rows of COLUMNS, details, totals and notes."""
    failures: list[str] = []
    rows: list[list[int]] = []
    details: list[dict[str, Any]] = []
    detail_bytes = capped = bare = frames = frame_bytes = 0
    total = sum(len(run.records) for run in runs)
    notes = []
    for index, run in enumerate(runs):
        family = None
        try:
            family = envs.family_of(str(run.run.get("env")))
        except (KeyError, ValueError):
            pass
        replayer = None
        try:
            for seed, record in zip(run.seeds, run.records, strict=True):
                if len(rows) >= LISTED_EPISODES:
                    break
                failure = record.first_failure
                if failure is not None and failure not in failures:
                    failures.append(failure)
                detail = -1
                calls = run.logged.calls.get(seed, [])
                has_data = (bool(calls) or seed in run.logged.actions
                            or family == envs.WORKFLOW)
                wants = len(details) < DETAILED_EPISODES and detail_bytes < DETAIL_BYTES
                capped += has_data and not wants
                bare += not has_data
                if wants and has_data:
                    if family == envs.WORKFLOW and replayer is None:
                        replayer = _Replayer(run)
                    entry = _detail(run, seed, record, calls, replayer,
                                    framed=frames < FRAMES and frame_bytes < FRAME_BYTES)
                    if entry["frame"] is not None:
                        frames += 1
                        frame_bytes += len(entry["frame"]["png"])
                    detail_bytes += len(json.dumps(entry).encode())
                    detail = len(details)
                    details.append(entry)
                rows.append([index, -1 if record.task_seed is None else int(record.task_seed),
                             int(record.success), -1 if failure is None
                             else failures.index(failure), int(record.completed),
                             int(record.calls), int(record.errors), detail])
        finally:
            if replayer is not None:
                replayer.close()
    if len(rows) < total:
        notes.append(f"the first {len(rows):,} of {total:,} episodes are listed (cap "
                     f"{LISTED_EPISODES:,} rows); the headline and profile count every episode")
    detailed = sum(1 for row in rows if row[-1] >= 0)
    if capped:
        notes.append(f"decisions are kept for the first {detailed:,} episodes, not for "
                     f"{capped:,} more (caps: {DETAILED_EPISODES} episodes, {DETAIL_BYTES:,} "
                     f"bytes in all, {EPISODE_BYTES:,} bytes per episode, {PROMPT_BYTES:,} "
                     f"bytes per prompt, {REPLY_BYTES:,} per reply)")
    if bare:
        notes.append(f"{bare:,} episodes have their outcome only: their log holds no trace "
                     "or call lines, and no reference controller to play them again")
    return {"total": total, "listed": len(rows), "columns": list(COLUMNS),
            "runs": [run.label for run in runs], "failures": failures, "episodes": rows,
            "details": details, "notes": notes}
