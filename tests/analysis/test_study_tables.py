"""A study's tables as data (analysis/studies/study_tables.py): the JSON beside NAME.md holds
the blocks the Markdown was rendered from, and `diagym report` shows them without reading the
Markdown."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from diagym.analysis.report.inputs import build
from diagym.analysis.report.model import Table
from diagym.analysis.studies.study_tables import (
    Heading,
    markdown,
    read_study_tables,
    study_table,
    tables_path,
    write_study_tables,
)

CELL = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="|\n\r"),
               min_size=1, max_size=8)
PROSE = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r"),
                min_size=1, max_size=20)


@st.composite
def tables(draw: st.DrawFn) -> object:
    width = draw(st.integers(1, 4))
    rows = draw(st.lists(st.lists(CELL, min_size=width, max_size=width), max_size=4))
    return study_table(draw(st.lists(CELL, min_size=width, max_size=width)), rows,
                       draw(st.one_of(st.just(""), PROSE)))


BLOCKS = st.lists(st.one_of(tables(), st.builds(Heading, CELL, st.integers(1, 4)),
                            PROSE), min_size=1, max_size=6)


@settings(max_examples=40, deadline=None)
@given(BLOCKS)
def test_the_json_holds_the_blocks_the_markdown_was_rendered_from(tmp_path_factory,
                                                                   blocks: list) -> None:
    md = tmp_path_factory.mktemp("study") / "study.md"
    write_study_tables(md, blocks, end="\n\n")
    assert md.read_text() == markdown(blocks) + "\n\n"
    assert read_study_tables(tables_path(md)) == blocks


def test_the_report_shows_a_studys_tables_from_its_json(tmp_path: Path) -> None:
    write_study_tables(tmp_path / "study.md", [
        Heading("Table 1. Two rows"),
        study_table(("a", "b"), [(1, 2), (3, "x")], "Caption of table 1."),
        "A closing paragraph."])
    (tmp_path / "study.md").write_text("| not | what |\n| --- | --- |\n| is | shown |\n")
    report = build([tmp_path])
    shown = [item for item in report.sections["tables"] if isinstance(item, Table)]
    assert [(t.title, t.columns, t.rows, t.note) for t in shown] == [
        ("study.md / Table 1. Two rows", ("a", "b"), (("1", "2"), ("3", "x")),
         "Caption of table 1.")]
    assert not any("study.md" in note for note in report.notes)


def test_a_markdown_file_without_its_json_is_named_not_parsed(tmp_path: Path) -> None:
    (tmp_path / "old.md").write_text("| a | b |\n| --- | --- |\n| 1 | 2 |\n")
    (tmp_path / "old.csv").write_text("a,b\n1,2\n")
    report = build([tmp_path])
    assert not report.sections.get("tables")
    assert (f"{tmp_path / 'old.md'}: no old.tables.json beside it (a study written before "
            "studies wrote their tables as data), so its tables are not shown") in report.notes
