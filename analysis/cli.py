"""The `diagym` command line: one entry point for the paper's analyses.

Each subcommand is a pair of functions, `_add_<name>_parser` to declare its flags and
`_cmd_<name>` to run it, registered in SUBCOMMANDS; adding `run` or `reproduce` later means
adding one more pair without touching the others. Flags are validated by argparse itself, so a
bad value exits with status 2 and a message naming the flag and what is allowed.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from envs.workflow_spec import MAX_OPS

AUDIT_KEYS = ("family", "depth", "edges", "masks", "orders", "ready_nodes")
AUDIT_HEADERS = ("family", "depth", "edges", "masks", "orders", "ready nodes")


def _n_ops(text: str) -> int:
    """argparse type for --n-ops: the env's range, checked before any env is built."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be an integer in 1..{MAX_OPS}; got {text!r}"
        ) from None
    if not 1 <= value <= MAX_OPS:
        raise argparse.ArgumentTypeError(f"must be in 1..{MAX_OPS}; got {value}")
    return value


# -- audit ---------------------------------------------------------------------------------
def _add_audit_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "audit",
        help="exact structural audit of the prerequisite graphs (paper Table 1)",
        description=(
            "Enumerate edges, reachable completion sets, valid orders and mean ready "
            "operations of the seed-0 task for both graph families and every depth dividing "
            "--n-ops."
        ),
    )
    parser.add_argument(
        "--n-ops",
        type=_n_ops,
        required=True,
        metavar="N",
        help=f"number of operations, 1..{MAX_OPS}",
    )
    parser.add_argument("--json", action="store_true", help="print a JSON list instead")
    parser.set_defaults(func=_cmd_audit)


def format_audit_table(rows: list[dict[str, Any]]) -> str:
    """Right-aligned columns (family left-aligned), ready nodes to two decimals."""
    cells = [
        [
            str(r["family"]),
            str(r["depth"]),
            str(r["edges"]),
            str(r["masks"]),
            str(r["orders"]),
            f"{r['ready_nodes']:.2f}",
        ]
        for r in rows
    ]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(AUDIT_HEADERS)]

    def line(values: list[str] | tuple[str, ...]) -> str:
        first = values[0].ljust(widths[0])
        rest = (v.rjust(w) for v, w in zip(values[1:], widths[1:], strict=True))
        return "  ".join([first, *rest])

    return "\n".join([line(AUDIT_HEADERS), *(line(c) for c in cells)])


def _cmd_audit(args: argparse.Namespace) -> int:
    from analysis.audit import audit_table  # deferred: only this subcommand needs the env

    rows = [{key: row[key] for key in AUDIT_KEYS} for row in audit_table(args.n_ops)]
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(format_audit_table(rows))
    return 0


# -- entry point ---------------------------------------------------------------------------
SUBCOMMANDS: tuple[Callable[[Any], None], ...] = (_add_audit_parser,)


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every subcommand attached."""
    parser = argparse.ArgumentParser(
        prog="diagym",
        description="diagym: environments and analyses for seed 003's workflow study.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in SUBCOMMANDS:
        add(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse argv (default sys.argv[1:]), run the chosen subcommand, return its exit status."""
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    func: Callable[[argparse.Namespace], int] = args.func
    return func(args)


if __name__ == "__main__":
    raise SystemExit(main())
