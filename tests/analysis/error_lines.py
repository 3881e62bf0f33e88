"""The one error line of a failing `diagym` call: status 2, a single line, no traceback."""

from __future__ import annotations

import pytest

from diagym.analysis.cli.main import main


def one_error_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one error line of `diagym argv`, after checking status 2 and a single line."""
    try:
        status = main(argv)
    except SystemExit as exit_info:  # argparse's errors
        status = exit_info.code
    captured = capsys.readouterr()
    assert status == 2, captured
    assert "Traceback" not in captured.err
    lines = captured.err.splitlines()
    assert len(lines) == 1, lines
    return lines[0]
