"""A study's tables as data: the Markdown file a study writes and the JSON beside it that
`diagym report` reads are both rendered here from one list of blocks (headings, paragraphs,
tables), so the report shows a study's tables without parsing its Markdown back."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TABLES_SUFFIX = ".tables.json"


@dataclass(frozen=True)
class Heading:
    text: str
    level: int = 3


@dataclass(frozen=True)
class StudyTable:
    """A table with its caption (the paragraph above it in the Markdown)."""

    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    caption: str = ""


Block = str | Heading | StudyTable


def study_table(headers: Sequence[Any], rows: Sequence[Sequence[Any]],
                caption: str = "") -> StudyTable:
    """A StudyTable with every cell as the text the Markdown shows."""
    return StudyTable(tuple(str(h) for h in headers),
                      tuple(tuple(str(cell) for cell in row) for row in rows), caption)


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join("---" for _ in headers) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _block_markdown(block: Block) -> str:
    if isinstance(block, Heading):
        return "#" * block.level + " " + block.text
    if isinstance(block, StudyTable):
        table = markdown_table(block.headers, block.rows)
        return f"{block.caption}\n\n{table}" if block.caption else table
    return block


def markdown(blocks: Sequence[Block]) -> str:
    """The blocks as Markdown, a blank line between blocks."""
    return "\n\n".join(_block_markdown(b) for b in blocks)


def _block_json(block: Block) -> dict[str, Any]:
    if isinstance(block, Heading):
        return {"heading": block.text, "level": block.level}
    if isinstance(block, StudyTable):
        return {"caption": block.caption, "headers": list(block.headers),
                "rows": [list(row) for row in block.rows]}
    return {"text": block}


def tables_path(markdown_path: Path) -> Path:
    """Where the tables of NAME.md are written as data: NAME.tables.json beside it."""
    return markdown_path.with_name(markdown_path.stem + TABLES_SUFFIX)


def write_study_tables(markdown_path: Path, blocks: Sequence[Block], end: str = "\n") -> Path:
    """NAME.md (`markdown(blocks)` + `end`) and NAME.tables.json (the same blocks as data)."""
    markdown_path = Path(markdown_path)
    markdown_path.write_text(markdown(blocks) + end)
    tables_path(markdown_path).write_text(json.dumps(
        {"markdown": markdown_path.name, "blocks": [_block_json(b) for b in blocks]},
        indent=1) + "\n")
    return markdown_path


def read_study_tables(path: Path) -> list[Block]:
    """The blocks of a NAME.tables.json; ValueError, one line, for a file not of that shape."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("blocks"), list):
        raise ValueError(f"{path}: not a study's tables (no \"blocks\" list)")
    blocks: list[Block] = []
    for item in data["blocks"]:
        if "heading" in item:
            blocks.append(Heading(str(item["heading"]), int(item.get("level", 3))))
        elif "headers" in item:
            blocks.append(study_table(item["headers"], item.get("rows") or [],
                                      str(item.get("caption", ""))))
        else:
            blocks.append(str(item.get("text", "")))
    return blocks
