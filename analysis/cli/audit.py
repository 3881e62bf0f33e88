"""`diagym audit`: seed 003's Table 1 by exact enumeration of the env's graphs."""

from __future__ import annotations

import argparse
import json
from typing import Any

from diagym.analysis.cli.flags_general import bounded_int

AUDIT_KEYS = ("family", "depth", "edges", "masks", "orders", "ready_nodes")
AUDIT_HEADERS = ("family", "depth", "edges", "masks", "orders", "ready nodes")


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "audit",
        help="exact structural audit of the prerequisite graphs (paper Table 1)",
        description=(
            "Enumerate edges, reachable completion sets, valid orders and mean ready "
            "operations of the seed-0 task for both graph families and every depth dividing "
            "--n-ops."
        ),
    )
    from diagym.envs.workflow.params import MAX_OPS

    parser.add_argument("--n-ops", type=bounded_int(1, MAX_OPS), required=True, metavar="N",
                        help=f"number of operations, 1..{MAX_OPS}")
    parser.add_argument("--json", action="store_true",
                        help="print a JSON list instead of the table (default: off)")
    parser.set_defaults(func=run)


def format_audit_table(rows: list[dict[str, Any]]) -> str:
    """Right-aligned columns (family left-aligned), ready nodes to two decimals."""
    cells = [
        [str(r["family"]), str(r["depth"]), str(r["edges"]), str(r["masks"]), str(r["orders"]),
         f"{r['ready_nodes']:.2f}"]
        for r in rows
    ]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(AUDIT_HEADERS)]

    def line(values: list[str] | tuple[str, ...]) -> str:
        first = values[0].ljust(widths[0])
        rest = (v.rjust(w) for v, w in zip(values[1:], widths[1:], strict=True))
        return "  ".join([first, *rest])

    return "\n".join([line(AUDIT_HEADERS), *(line(c) for c in cells)])


def run(args: argparse.Namespace) -> int:
    from diagym.analysis.audit import audit_table  # deferred: only this command needs the env

    rows = [{key: row[key] for key in AUDIT_KEYS} for row in audit_table(args.n_ops)]
    print(json.dumps(rows, indent=2) if args.json else format_audit_table(rows))
    return 0
