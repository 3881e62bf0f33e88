"""The one way benchmarks hand over results: the JSON after the printed table, optionally
saved (docs/benchmarks/*.json hold the quoted figures)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def emit(result: dict[str, Any], json_out: Path | None) -> None:
    text = json.dumps(result, indent=2)
    print(text)
    if json_out:
        json_out.write_text(text + "\n")
