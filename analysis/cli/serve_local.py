"""`diagym serve-local`: the bundled Gemma 3 270M behind llama.cpp's OpenAI-compatible API."""

from __future__ import annotations

import argparse
from typing import Any

from analysis.cli.common import bounded_int, fail


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "serve-local",
        help="serve the bundled Gemma 3 270M model on 127.0.0.1 (OpenAI-compatible)",
        description=(
            "Start llama.cpp's OpenAI-compatible server with Gemma 3 270M Q4_K_M (the "
            "[local-llm] extra) on 127.0.0.1 until Ctrl-C, then stop it cleanly."
        ),
    )
    parser.add_argument("--port", type=bounded_int(0, 65535), default=8080, metavar="P",
                        help="port on 127.0.0.1, 0 for any free one (default: %(default)s)")
    parser.set_defaults(func=run)


CHECK_EVERY_S = 1.0  # how often a serving server is checked to be alive


def run(args: argparse.Namespace) -> int:
    """Serve until Ctrl-C or SIGTERM, this command's normal end: the server is stopped (no
    child left), "server stopped" is printed and the status is 0. A server that dies
    meanwhile is reported with its exit code and last output, status 2."""
    import time

    from llm_policies.client import local_server

    try:
        with local_server.running_server(port=args.port) as server:
            print(f"serving Gemma 3 270M at {server.base_url} (pid {server.pid}; chat format "
                  f"gemma: no system role; response_format json_object); Ctrl-C stops it",
                  flush=True)
            while True:
                server.check_alive()
                time.sleep(CHECK_EVERY_S)
    except RuntimeError as error:
        return fail("serve-local", error)
    except KeyboardInterrupt:  # SIGTERM too, inside diagym's entry (analysis.interrupts)
        print("server stopped", flush=True)
        return 0
