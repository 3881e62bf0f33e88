"""`diagym dacs-live`: seed 002's phase 4, live chat-model agents steering a DACS or flat
orchestrator, judged by a chat model beside the keyword rubric."""

from __future__ import annotations

import argparse
import contextlib
import json
from pathlib import Path
from typing import Any

from analysis.cli.common import bounded_int, fail


def add_parser(subparsers: Any) -> None:
    from llm_policies.client.local_server import LOCAL_MODELS
    from llm_policies.live_agents.scenarios import SCENARIOS

    parser = subparsers.add_parser(
        "dacs-live",
        help="seed 002's phase 4: live LLM agents, DACS vs flat, LLM judge and kappa",
        description=(
            "Live sub-agents (chat models) work on their own tasks, ask the orchestrator with "
            "[[STEER: question]] and stop on [[DONE]] or --max-steps; the orchestrator "
            "answers from a focus (dacs) or flat window; a judge model scores each answer "
            "against its rubric, beside the keyword score, with Cohen's kappa between them. "
            "Trials are paired (same seeds in both conditions), appended to --log and resumed "
            "from it."))
    parser.add_argument("--scenario", choices=tuple(SCENARIOS), default="ra1_n3",
                        help="the scenario of agents, tasks and rubrics: ra1_n3 (N = 3) or "
                             "ra2_n5 (N = 5) (default: %(default)s)")
    parser.add_argument("--trials", type=bounded_int(1), default=2, metavar="K",
                        help="paired trials per condition (default: %(default)s)")
    parser.add_argument("--max-steps", type=bounded_int(1), default=6, metavar="S",
                        help="turns per agent (default: %(default)s)")
    parser.add_argument("--max-steers", type=bounded_int(1), default=3, metavar="Q",
                        help="steering requests answered per agent (default: %(default)s)")
    parser.add_argument("--seed", type=bounded_int(0), default=0, metavar="S",
                        help="scenario seed of the first trial; trial i plays S + i "
                             "(default: %(default)s)")
    for role in ("agent", "orchestrator", "judge"):
        parser.add_argument(f"--{role}-base-url", default=None, metavar="URL",
                            help=f"the {role}'s OpenAI-compatible server (default: none: "
                                 "--local serves every role)")
        parser.add_argument(f"--{role}-model", default=None, metavar="NAME",
                            help=f"the {role}'s model name on that server (default: none)")
    parser.add_argument("--local", choices=tuple(LOCAL_MODELS), default=None,
                        help="serve a bundled model for every role, one server (default: none)")
    parser.add_argument("--max-tokens", type=bounded_int(8), default=160, metavar="T",
                        help="completion tokens per call (default: %(default)s)")
    parser.add_argument("--log", type=Path, required=True, metavar="FILE",
                        help="JSONL of every call and trial; an existing one is resumed "
                             "(required, no default)")
    parser.add_argument("--out", type=Path, default=Path("results"), metavar="DIR",
                        help="where phase4.csv and phase4.md go (default: results)")
    parser.set_defaults(func=run)


def _endpoints(args: argparse.Namespace) -> dict[str, tuple[str, str]] | str:
    ends = {}
    for role in ("agent", "orchestrator", "judge"):
        url, model = getattr(args, f"{role}_base_url"), getattr(args, f"{role}_model")
        if args.local is not None:
            if url or model:
                return f"--{role}-base-url/--{role}-model cannot be used with --local"
            continue
        if not url or not model:
            return f"--{role}-base-url and --{role}-model are required (or --local NAME)"
        ends[role] = (url, model)
    return ends


def run(args: argparse.Namespace) -> int:
    from llm_policies.client.transport import ChatClient
    from llm_policies.live_agents.scenarios import SCENARIOS
    from llm_policies.live_agents.study import run_study, tables, write_tables
    from llm_policies.live_agents.trial import FoldSystem

    ends = _endpoints(args)
    if isinstance(ends, str):
        print(f"diagym dacs-live: error: {ends}")
        return 2
    scenario = SCENARIOS[args.scenario]
    with contextlib.ExitStack() as stack:
        if args.local is not None:
            from llm_policies.client.local_server import local_model, local_server

            url = stack.enter_context(local_server(model=args.local))
            name = local_model(args.local).name
            ends = {role: (url, name) for role in ("agent", "orchestrator", "judge")}
            fold = not local_model(args.local).system_role
        else:
            fold = False
        clients: dict[tuple[str, int], Any] = {}

        def make_chat(role: str, seed: int) -> Any:
            if (role, seed) not in clients:
                url, model = ends[role]
                chat = stack.enter_context(ChatClient(
                    base_url=url, model=model, seed=seed, max_tokens=args.max_tokens,
                    temperature=0.0, timeout=300.0, response_format="none"))
                clients[(role, seed)] = FoldSystem(chat) if fold else chat
            return clients[(role, seed)]

        try:
            entries = run_study(scenario, args.trials, make_chat, args.log, seed=args.seed,
                                max_steps=args.max_steps, max_steers=args.max_steers)
        except (OSError, ValueError, RuntimeError) as error:
            return fail("dacs-live", error)
    rows = tables(scenario, entries)
    write_tables(rows, args.out)
    print(json.dumps(rows, indent=1))
    return 0
