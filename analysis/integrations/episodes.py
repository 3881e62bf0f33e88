"""Which episodes an integration's task plays, and how one is played.

`battery` and `seeds` give (env kwargs, task seeds) per configuration. The inspect tasks,
the TRL datasets and the verifiers tasksets each turn the same lists into their own rows
(samples, dataset rows, tasks), so a battery split here is the one `diagym diagnose` plays
and a log of any of them is read as a diagnose log. No framework is imported here, so each
integration needs only its own extra.

`play_lines` plays one episode with any chat model through diagym's own LLMPolicy, runner
and run log (the harness's prompts, the text-action rule, a trace `diagnose` decodes), and
returns the episode's run-log lines: an integration whose framework owns the model only
bridges its calls to a ChatModel (inspect's InspectChat, verifiers' VerifiersChat).
"""

from __future__ import annotations

import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from diagym import envs
from diagym.analysis.llm_runs import make_text_env
from diagym.controllers.callline import CALL
from diagym.controllers.policy import EpisodeRecord
from diagym.controllers.rollout import rollout
from diagym.controllers.runlog import read_entries
from diagym.controllers.tracing import Traced
from diagym.envs._core.checks import check_int, check_seed
from diagym.llm_policies.policy import LLMPolicy

__all__ = ["DACS_ID", "DEFAULT_EPISODES", "WORKFLOW_ID", "Configuration", "battery",
           "episode_record", "play_lines", "seeds"]

WORKFLOW_ID, DACS_ID = "StatefulWorkflow-v0", "DACSSteering-v0"
DEFAULT_EPISODES = 8
Configuration = tuple[Mapping[str, Any], Sequence[int]]  # (gym.make kwargs, task seeds)


def seeds(episodes: int, seed: int) -> range:
    """The task seeds seed..seed+episodes-1, both checked."""
    check_int("episodes", episodes, 1)
    check_seed(seed)
    return range(seed, seed + episodes)


def battery(env: str = WORKFLOW_ID, budget: int | None = None,
            seed: int = 0) -> list[Configuration]:
    """The diagnosis battery of `env`, `budget` episodes split as `diagym diagnose` splits
    them (StatefulWorkflow: by the battery's shares, default 512; DACSSteering: evenly over
    its 4 configurations, default 32); configurations given no episode are left out."""
    from diagym.analysis.diagnose.defaults import DACS_BATTERY, DACS_EPISODES, DEFAULT_BUDGET

    if env == WORKFLOW_ID:
        from diagym.analysis.diagnose.battery import DEFAULT_BATTERY, DEFAULT_SHARES, allocate
        from diagym.analysis.diagnose.run import check_battery_seed, env_kwargs

        allocation = allocate(DEFAULT_SHARES, check_int(
            "budget", DEFAULT_BUDGET if budget is None else budget, 1))
        check_battery_seed(seed, allocation)
        return [(env_kwargs(spec), range(seed, seed + n))
                for spec, n in zip(DEFAULT_BATTERY, allocation, strict=True) if n]
    if env == DACS_ID:
        count = len(DACS_BATTERY)
        budget = check_int("budget", DACS_EPISODES * count if budget is None else budget, count)
        if budget % count:
            raise ValueError(f"budget must be a multiple of {count} (the {DACS_ID} battery's "
                             f"configurations); got {budget}")
        return [(kwargs, seeds(budget // count, seed)) for kwargs in DACS_BATTERY]
    raise ValueError(f"env must be one of {WORKFLOW_ID!r} | {DACS_ID!r}; got {env!r}")


def _decoder(env: Any) -> Any:
    """How a trace records the action a reply executed, as `diagnose` decodes it for the
    env's family (analysis/cli/run.py `traced`)."""
    if envs.family_of(env, strict=False) == envs.DACS:
        from diagym.analysis.diagnose.dacs.replay import text_option_decoder

        return text_option_decoder(env)
    from diagym.analysis.diagnose.run import text_decoder

    return text_decoder(env)


def play_lines(chat: Any, env_id: str, env_kwargs: Mapping[str, Any], seed: int, *,
               harness: str, invalid_retries: int, bounded_fields: bool
               ) -> list[dict[str, Any]]:
    """One episode of `chat` on env_id(**env_kwargs) reset with `seed`, through diagym's
    runner into a scratch run log; its lines, call lines without their prompts."""
    env = make_text_env(env_id, **dict(env_kwargs))
    try:
        policy = LLMPolicy.for_env(chat, env, harness=harness, invalid_retries=invalid_retries,
                                   bounded_fields=bounded_fields)
        with tempfile.TemporaryDirectory(prefix="diagym-episode-") as scratch:
            path = Path(scratch) / "episode.jsonl"
            rollout(env, Traced(policy, _decoder(env)), 1, seed=seed, log=path)
            return [{k: v for k, v in entry.items() if not (entry["type"] == CALL
                                                          and k == "prompt")}
                    for entry in read_entries(path, Counter())]
    finally:
        env.close()


def episode_record(lines: Sequence[Mapping[str, Any]]) -> EpisodeRecord:
    """The episode record among an episode's run-log lines."""
    record = next(line["record"] for line in lines if line.get("type") == "episode")
    return EpisodeRecord(**record)
