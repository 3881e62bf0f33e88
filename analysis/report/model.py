"""What a report holds, independent of how it is drawn: sections of tables, figures, texts and
key-value lists, and the trace viewer's bounded episode data.

Why a model between reading and rendering: one report merges inputs of different kinds (run
logs, study directories, diagnosis JSON), and each reader adds what it knows to the same
sections, so the HTML writer has one order of sections and no knowledge of where a table came
from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# The report's sections in the order they are drawn: (key, heading).
# A diagnosis opens the page (analysis/report/verdict.py): its verdict before any run table;
# a study's figures come before its tables (reproduce's Table 4 alone has 176 rows).
SECTIONS = (
    ("verdict", "Diagnosis"),
    ("provenance", "Provenance"),
    ("headline", "Run summary"),
    ("profile", "Structural profile"),
    ("tables", "Study tables"),
    ("diagnosis", "Mechanisms and attribution"),
    ("cost", "Cost and latency"),
    ("files", "Other outputs"),
)


@dataclass(frozen=True)
class Clauses:
    """A table cell holding several clauses, drawn as a list."""

    items: tuple[str, ...]


@dataclass(frozen=True)
class Table:
    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    note: str = ""


@dataclass(frozen=True)
class Figure:
    title: str
    png: bytes
    note: str = ""


@dataclass(frozen=True)
class Text:
    """Text kept as written (preformatted), or prose drawn as paragraphs."""

    title: str
    text: str
    note: str = ""
    preformatted: bool = True


@dataclass(frozen=True)
class Facts:
    """A key-value list (a run's provenance)."""

    title: str
    items: tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class Lead:
    """The sentence a page opens with (a diagnosis's headline), its tone ("fits", "outside" or
    "" for neither) and what it was counted on."""

    title: str
    text: str
    tone: str = ""
    note: str = ""


Item = Table | Figure | Text | Facts | Lead


@dataclass
class Report:
    """Sections (SECTIONS keys -> items), the viewer's data (analysis/report/episodes.py) and
    the notes a reader must see (what was truncated or left out, and why)."""

    sources: list[str] = field(default_factory=list)
    sections: dict[str, list[Item]] = field(
        default_factory=lambda: {key: [] for key, _ in SECTIONS})
    viewer: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    def add(self, section: str, item: Item) -> None:
        self.sections[section].append(item)

    @property
    def episodes(self) -> int:
        return 0 if self.viewer is None else int(self.viewer["total"])
