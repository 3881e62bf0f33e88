"""A Report as one self-contained HTML file: CSS and the viewer's JS inline, figures as
data: URIs, the episodes as one inline JSON blob, so it opens from disk with no server and no
network.

Every string from the inputs is escaped (html.escape; in the JSON blob "<", ">" and "&" are
written as \\u escapes, so no text can close the script element), and the viewer writes data
only through textContent: a log is data, never markup.
"""

from __future__ import annotations

import base64
import datetime
import html
import json
from importlib import resources
from typing import Any

from diagym.analysis.report.model import (
    SECTIONS,
    Clauses,
    Facts,
    Figure,
    Item,
    Lead,
    Report,
    Table,
    Text,
)

SIZE_MARK = "@@REPORT_BYTES@@"


def _asset(name: str) -> str:
    return resources.files("diagym.analysis.report").joinpath(name).read_text(encoding="utf-8")


def _e(value: Any) -> str:
    if isinstance(value, dict | list | tuple):
        value = json.dumps(value, sort_keys=True, default=str)
    return html.escape("-" if value is None else str(value))


def _numeric(value: Any) -> bool:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return True
    try:
        float(str(value).rstrip("%"))
    except ValueError:
        return False
    return True


PROSE = 40  # characters: a longer cell wraps, a shorter one (a name, a number) never does


def _cell(value: Any) -> str:
    if isinstance(value, Clauses):
        if not value.items:
            return "<td>-</td>"
        return ('<td class="prose"><ul class="clauses">'
                + "".join(f"<li>{_e(c)}</li>" for c in value.items) + "</ul></td>")
    if _numeric(value):
        return f'<td class="num">{_e(value)}</td>'
    text = _e(value)
    return f'<td class="prose">{text}</td>' if len(text) > PROSE else f"<td>{text}</td>"


def _table(item: Table) -> str:
    head = "".join(f"<th>{_e(c)}</th>" for c in item.columns)
    body = "".join("<tr>" + "".join(_cell(v) for v in row) + "</tr>" for row in item.rows)
    return (f'<div class="scroll"><table><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table></div>")


def _item(item: Item) -> str:
    title = f"<h3>{_e(item.title)}</h3>" if item.title else ""
    note = getattr(item, "note", "")
    note_html = f'<p class="note">{_e(note)}</p>' if note else ""
    if isinstance(item, Table):
        return title + _table(item) + note_html
    if isinstance(item, Figure):
        data = base64.b64encode(item.png).decode("ascii")
        caption = _e(item.note or item.title)
        return (f'{title}<figure class="figure"><img alt="{_e(item.title)}" '
                f'src="data:image/png;base64,{data}"><figcaption>{caption}</figcaption></figure>')
    if isinstance(item, Text):
        if not item.preformatted:
            paragraphs = [p for p in item.text.split("\n\n") if p.strip()]
            return title + "".join(f"<p>{_e(p)}</p>" for p in paragraphs) + note_html
        return title + f"<pre>{_e(item.text)}</pre>" + note_html
    if isinstance(item, Lead):
        tone = f" {item.tone}" if item.tone else ""
        return (title + f'<p class="lead{tone}">{_e(item.text)}</p>' + note_html)
    if isinstance(item, Facts):
        rows = "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in item.items)
        return title + f'<dl class="facts">{rows}</dl>'
    raise TypeError(f"not a report item: {type(item).__name__}")


def _blob(data: dict[str, Any]) -> str:
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def render(report: Report) -> str:
    """The report's HTML; its own size in bytes is written into it (SIZE_MARK)."""
    generated = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    present = [(key, heading) for key, heading in SECTIONS if report.sections[key]]
    nav = [f'<a href="#{key}">{_e(heading)}</a>' for key, heading in present]
    if report.viewer is not None:
        nav.append('<a href="#traces">Trace viewer</a>')
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>diagym report: {_e(', '.join(report.sources))}</title>",
        f"<style>{_asset('style.css')}</style></head><body>",
        "<header><h1>diagym report</h1>",
        f"<p>Inputs: {_e(', '.join(report.sources))}</p>",
        f"<p>Generated {generated}; "
        + (f"{report.episodes:,} logged episodes; " if report.episodes else "")
        + "this file is "
        f"{SIZE_MARK} bytes, self-contained (no network).</p>",
        f"<nav>{''.join(nav)}</nav></header><main>",
    ]
    notes = ""
    if report.notes:
        items = "".join(f"<li>{_e(n)}</li>" for n in report.notes)
        notes = (f'<section id="notes" class="notes"><strong>Truncated or left out'
                 f"</strong><ul>{items}</ul></section>")
    if notes and not report.sections["verdict"]:
        parts.append(notes)
    for key, heading in present:
        parts.append(f'<section id="{key}"><h2>{_e(heading)}</h2>')
        parts += [_item(item) for item in report.sections[key]]
        parts.append("</section>")
        if notes and key == "verdict":  # the diagnosis first, then what the page leaves out
            parts.append(notes)
    if report.viewer is not None:
        v = report.viewer
        decided = sum(1 for detail in v["details"] if detail["decisions"])
        parts.append('<section id="traces"><h2>Trace viewer</h2>'
                     f'<p class="note">{v["listed"]:,} of {v["total"]:,} episodes listed, '
                     f'{decided:,} with their decisions; rows are drawn '
                     f"{25} per page from the inline data. Click a row to see its decisions."
                     '</p><div id="viewer"></div></section>')
        parts.append(f'<script type="application/json" id="viewer-data">{_blob(v)}</script>')
        parts.append(f"<script>{_asset('viewer.js')}</script>")
    parts.append("</main></body></html>\n")
    text = "\n".join(parts)
    rest = len(text.encode("utf-8")) - len(SIZE_MARK)
    size = rest
    while rest + len(f"{size:,}") != size:  # the number counts its own digits
        size = rest + len(f"{size:,}")
    return text.replace(SIZE_MARK, f"{size:,}", 1)
