"""The `diagym` console script: audit output in both forms and argparse-style errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from analysis.audit import audit_table
from analysis.cli import main

KEYS = {"family", "depth", "edges", "masks", "orders", "ready_nodes"}


def test_audit_json_matches_audit_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "--n-ops", "8", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 8
    assert all(set(row) == KEYS for row in rows)
    assert rows == audit_table(8)


def test_audit_table_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "--n-ops", "4"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].split() == ["family", "depth", "edges", "masks", "orders", "ready", "nodes"]
    expected = audit_table(4)
    assert len(lines) == 1 + len(expected)
    assert len({len(line) for line in lines}) == 1  # aligned columns
    for line, row in zip(lines[1:], expected, strict=True):
        fields = line.split()
        assert fields[:5] == [str(row[k]) for k in ("family", "depth", "edges", "masks", "orders")]
        assert fields[5] == f"{row['ready_nodes']:.2f}"


def test_module_entry_point() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "analysis.cli", "audit", "--n-ops", "4", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    rows = json.loads(result.stdout)
    assert rows == audit_table(4)


@pytest.mark.parametrize("value", ["0", "40", "-3", "eight"])
def test_bad_n_ops_exits_2_naming_the_flag(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as excinfo:
        main(["audit", "--n-ops", value])
    assert excinfo.value.code == 2
    err = capsys.readouterr().err
    assert "--n-ops" in err
    assert "1..32" in err


def test_missing_subcommand_exits_2() -> None:
    with pytest.raises(SystemExit) as excinfo:
        main([])
    assert excinfo.value.code == 2
