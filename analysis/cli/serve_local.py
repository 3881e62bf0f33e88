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
    parser.add_argument("--port", type=bounded_int(0, 65535), default=8080, metavar="P")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import signal
    import threading

    from llm_policies.client import local_server

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        with local_server.local_server(port=args.port) as base_url:
            print(f"serving Gemma 3 270M at {base_url} (chat format gemma: no system role; "
                  f"response_format json_object); Ctrl-C stops it", flush=True)
            try:
                stop.wait()
            except KeyboardInterrupt:
                pass
    except RuntimeError as error:
        return fail("serve-local", error)
    print("server stopped")
    return 0
