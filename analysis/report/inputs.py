"""Every input of `diagym report` read into one Report: run logs (.jsonl), study directories
(CSV, JSON, Markdown, PNG and provenance.json beside them) and diagnosis JSON.

What each kind adds, section by section:

* a run log: per run, the provenance of its sessions; the headline (analysis/summary.py's
  summary: success with its Wilson interval, work, first failures, steering, model calls); the
  structural profile (analysis/report/profile.py); the calls' cost and latency
  (controllers/runlog.py `call_totals`); and its episodes, for the trace viewer.
* a diagnosis JSON (analysis/diagnose/report.py `to_json`): first on the
  page its headline, fit test and component verdicts (analysis/report/verdict.py); its
  ranked mechanisms and attribution; success per battery configuration with intervals; and the
  diagnosis PNG beside it, which draws the agent over the best mechanisms' predicted bands.
* a study directory: provenance.json, its tables as the headline (the NAME.tables.json a
  study writes beside its NAME.md, analysis/studies/study_tables.py; a NAME.md without one is
  noted, not parsed), its plots as the profile, its CSV tables (the first CSV_ROWS rows), and
  any run log or diagnosis JSON in it read as above.

Bounds: a PNG larger than PNG_BYTES, or beyond FIGURE_BYTES in all, is named, not inlined;
a text file is cut at TEXT_BYTES. Each cut is stated in the report.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from diagym.analysis.plotting import TITLE_KEY
from diagym.analysis.policy_label import policy_label
from diagym.analysis.report.episodes import clip, viewer_data
from diagym.analysis.report.logs import LogRun, RunLogFile, holds_an_entry, read_run_log
from diagym.analysis.report.model import Facts, Figure, Report, Table, Text
from diagym.analysis.report.profile import profile
from diagym.analysis.report.verdict import verdict_items
from diagym.analysis.stats import wilson_interval
from diagym.analysis.studies.study_tables import (
    TABLES_SUFFIX,
    Block,
    Heading,
    StudyTable,
    read_study_tables,
    tables_path,
)
from diagym.controllers.provenance import PROVENANCE_NAME
from diagym.controllers.runlog import CALL_FIELDS, call_totals

CSV_ROWS = 200
TEXT_BYTES = 60_000
PNG_BYTES = 1_500_000
TITLE_CHARS = 200  # a figure title read from its PNG
FIGURE_BYTES = 6_000_000
REPORT_NAME = "report.html"
DIAGNOSIS_NAME = "diagnosis.json"
DIAGNOSIS_PNG = "diagnosis.png"


def _text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, dict | list | tuple):
        return json.dumps(value, sort_keys=True, default=str)
    return str(value)


def _run_items(run: Any) -> list[tuple[str, Any]]:
    """A study's settings one fact each, in words ("seeds per configuration: 256"), not as
    one JSON object; a list reads as its items."""
    if not isinstance(run, dict):
        return [("run", run)]
    return [(str(key).replace("_", " "),
             ", ".join(map(str, value)) if isinstance(value, list | tuple) else value)
            for key, value in run.items()]


def _by_count(counts: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """Largest count first: a reader looks for the cause that dominates, not for a name in
    alphabetical order. Ties, and values that are not numbers, keep the diagnosis's order."""
    def key(item: tuple[str, Any]) -> float:
        value = item[1]
        return -float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
            else 0.0
    return sorted(counts.items(), key=key)


def _provenance_items(prov: Mapping[str, Any]) -> list[tuple[str, Any]]:
    commit = prov.get("git_commit")
    dirty = prov.get("git_dirty")
    libraries = prov.get("libraries") or {}
    return [("diagym version", prov.get("diagym_version")),
            ("git commit", f"{commit}{' (dirty)' if dirty else ''}" if commit else None),
            ("python", prov.get("python")),
            ("libraries", ", ".join(f"{k} {v}" for k, v in libraries.items() if v))]


def _policy_items(policy: Any) -> list[tuple[str, Any]]:
    """The policy by its label (analysis/policy_label.py), then what the label leaves out: a
    user's policy's own description (when it is more than its class name), a chat model's
    model and harness settings."""
    if not isinstance(policy, Mapping):
        return [("policy", policy)]
    items: list[tuple[str, Any]] = [("policy", policy_label(policy))]
    spec, own = policy.get("import"), policy.get("policy")
    if isinstance(spec, str) and own is not None and own != spec.rpartition(":")[2]:
        items.append(("its description", own))
    model = policy.get("model") or policy.get("llm")
    if model:
        items.append(("model", model))
    harness = {k: policy[k] for k in ("harness", "renderer", "order", "budget", "temperature",
                                      "max_tokens", "seed") if k in policy}
    if harness:
        items.append(("harness", harness))
    return items


def _seeds(run: LogRun) -> str:
    seeds = sorted(r.task_seed for r in run.records if r.task_seed is not None)
    if not seeds:
        return "-"
    span = seeds[-1] - seeds[0] + 1
    gaps = "" if span == len(seeds) else f" ({len(seeds)} seeds, not contiguous)"
    return f"{seeds[0]}..{seeds[-1]}{gaps}"


def _varying(values: Sequence[Any]) -> bool:
    return len({json.dumps(v, sort_keys=True, default=str) for v in values}) > 1


def _log_provenance(log: RunLogFile) -> list[Facts | Table]:
    """One list of what the log's runs share (env, kwargs, policy, the code of their
    sessions) and one table row per run for what differs."""
    runs = log.runs
    if not runs:
        return [Facts(f"Log {log.path}", (("runs", 0),))]
    kwargs = [run.run.get("env_kwargs") or {} for run in runs]
    keys = sorted({k for kw in kwargs for k in kw})
    varying = [k for k in keys if _varying([kw.get(k) for kw in kwargs])]
    shared_kwargs = {k: kwargs[0].get(k) for k in keys if k not in varying}
    other = sorted({k for run in runs for k in run.run if k not in ("env", "env_kwargs")})
    other_varying = [k for k in other if _varying([run.run.get(k) for run in runs])]
    items: list[tuple[str, Any]] = [("log", str(log.path)), ("runs", len(runs)),
                                    ("episodes", sum(len(run.records) for run in runs))]
    if not _varying([run.run.get("env") for run in runs]):
        items.append(("env", runs[0].run.get("env")))
    items.append(("env kwargs" + (" (shared)" if varying else ""), shared_kwargs))
    for key in other:
        if key not in other_varying:
            value = runs[0].run.get(key)
            items += _policy_items(value) if key == "policy" else [(key, value)]
    sessions = [session for run in runs for session in run.sessions]
    started = sorted(str(s.get("started")) for s in sessions if s.get("started"))
    if started:
        items.append(("sessions", f"{len(sessions)}, started {started[0]}"
                      + (f" .. {started[-1]}" if started[-1] != started[0] else "")))
    codes: list[dict[str, Any]] = []
    for session in sessions:
        code = session.get("provenance") or {}
        if code not in codes:
            codes.append(code)
    for number, code in enumerate(codes, start=1):
        prefix = f"code {number}: " if len(codes) > 1 else ""
        items += [(prefix + k, v) for k, v in _provenance_items(code)]
    extras = [{k: v for k, v in session.items()
               if k not in ("type", "run_id", "run", "run_name", "provenance", "started")}
              for session in sessions]
    for extra in extras:
        if extra:
            items.append(("session", extra))
            break
    out: list[Facts | Table] = [Facts(f"Log {log.path.name}", tuple(items))]
    if len(runs) > 1 or varying or other_varying:
        columns = ("run id", "name", *(["env"] if _varying([r.run.get("env") for r in runs])
                                      else []), *varying, *other_varying, "task seeds",
                   "episodes")
        rows = []
        for run, kw in zip(runs, kwargs, strict=True):
            row = [run.run_id, run.name or "-"]
            if "env" in columns:
                row.append(run.run.get("env"))
            row += [_text(kw.get(k)) for k in varying]
            row += [policy_label(run.run.get(k)) if k == "policy" else _text(run.run.get(k))
                    for k in other_varying]
            rows.append((*row, _seeds(run), len(run.records)))
        out.append(Table(f"Runs of {log.path.name}", columns, tuple(rows),
                         note="what differs between the runs; the rest is listed above"))
    else:
        out[0] = Facts(out[0].title, (*items, ("run id", runs[0].run_id),
                                      ("task seeds", _seeds(runs[0]))))
    return out


def _headline(log: RunLogFile, runs: Sequence[LogRun]) -> list[Table | Text]:
    rated = [run for run in runs if run.summary is not None]
    if not rated:
        return []
    dacs = any(run.summary.steering is not None for run in rated)
    llm = any(run.summary.model_calls is not None for run in rated)
    workflow = any(run.summary.steering is None for run in rated)
    columns = ["run", "episodes", *(["success", "Wilson 95%", "mean completed"] if workflow
                                    else []), "mean calls", "mean return", "first failures"]
    if dacs:
        columns += ["accuracy", "accuracy Wilson 95%", "decisions", "invalid", "contamination",
                    "window tokens mean / p95"]
    if llm:
        columns += ["model decisions", "valid replies", "cost USD", "cache hits"]
    rows = []
    for run in rated:
        s = run.summary
        low, high = s.success_ci
        # a DACS episode has no success outcome and completes no operation (summary.py)
        outcome = ([] if not workflow else ["-", "-", "-"] if s.steering is not None else
                   [f"{100 * s.success:.2f}%", f"[{100 * low:.2f}, {100 * high:.2f}]",
                    f"{s.mean_completed:.2f}"])
        row = [run.label, s.episodes, *outcome, f"{s.mean_calls:.2f}", f"{s.mean_return:.3f}",
               ", ".join(f"{k} {v}" for k, v in s.failures.items()) or "none"]
        if dacs:
            t = s.steering
            row += (["-"] * 6 if t is None else
                    [f"{t.accuracy:.3f}", f"[{t.accuracy_ci[0]:.3f}, {t.accuracy_ci[1]:.3f}]",
                     t.decisions, t.invalid, f"{t.contamination:.3f}",
                     f"{t.mean_tokens:.0f} / {t.p95_tokens:.0f}"])
        if llm:
            m = s.model_calls
            row += (["-"] * 4 if m is None else
                    [m.decisions, "-" if m.schema_valid_rate is None
                     else f"{100 * m.schema_valid_rate:.1f}%",
                     "unknown price" if m.cost_usd is None else f"{m.cost_usd:.4f}",
                     m.cache_hits])
        rows.append(tuple(row))
    items: list[Table | Text] = [Table(f"Summary of {log.path.name}", tuple(columns),
                                       tuple(rows),
                                       note="analysis/summary.py, the tables diagym run "
                                            "prints; intervals are Wilson 95%.")]
    if dacs:
        items.append(Text("", "On DACSSteering the headline is accuracy over decisions: its "
                              "episodes have no success outcome (and no success column)."))
    return items


def _cost(log: RunLogFile, runs: Sequence[LogRun]) -> Table | None:
    rows = []
    for run in runs:
        totals = call_totals(log.path, run.run_id)
        if not totals.calls and not totals.replayed:
            continue
        latencies = sorted(float(c["latency_s"]) for c in run.call_lines()
                           if isinstance(c.get("latency_s"), int | float))
        t = totals.totals

        def quantile(q: float, values: list[float] = latencies) -> str:
            return "-" if not values else f"{float(np.quantile(values, q)):.3f}"

        rows.append((run.label, totals.calls, int(t["provider_prompt_tokens"]),
                     int(t["provider_completion_tokens"]), int(t["cl100k_prompt_tokens"]),
                     int(t["cl100k_completion_tokens"]), f"{t['latency_s']:.2f}",
                     quantile(0.5), quantile(0.95), int(t["retries"]), f"{t['cost_usd']:.4f}",
                     f"{totals.replayed} ({totals.replayed_totals['cost_usd']:.4f} USD)"))
    if not rows:
        return None
    return Table(f"Model calls in {log.path.name}",
                 ("run", "calls", "provider prompt tokens", "provider completion tokens",
                  "cl100k prompt tokens", "cl100k completion tokens", "latency total s",
                  "latency median s", "latency p95 s", "retries", "cost USD",
                  "replayed calls (cost)"), tuple(rows),
                 note="controllers/runlog.py call_totals over the fields "
                      + ", ".join(CALL_FIELDS) + "; each decision counted once, calls a "
                      "replay voided counted apart.")


def _configuration_label(kwargs: Mapping[str, Any]) -> str:
    """A battery configuration as analysis/diagnose names it (its kwargs for another env)."""
    from diagym.analysis.diagnose.run import label
    from diagym.envs.workflow.params import WorkflowParams

    try:
        return label(WorkflowParams.from_kwargs(**kwargs))
    except (TypeError, ValueError):
        return _text(kwargs)


class Builder:
    """Accumulates inputs into one Report."""

    def __init__(self) -> None:
        self.report = Report()
        self.runs: list[LogRun] = []
        self.figure_bytes = 0

    def add(self, path: Path) -> None:
        path = Path(path)
        if path.is_dir():
            self.add_directory(path)
        elif path.suffix == ".jsonl":
            self.add_log(path)
        elif path.suffix == ".json":
            self.add_json(path)
        elif not path.exists():
            raise ValueError(f"INPUT {path}: no such file or directory")
        else:
            raise ValueError(f"INPUT {path}: not a run log (.jsonl), a study directory or a "
                             "diagnosis JSON (.json)")
        self.report.sources.append(str(path))

    def add_log(self, path: Path) -> None:
        log = read_run_log(path)
        if log.skipped_line():
            self.report.notes.append(log.skipped_line())
        for item in _log_provenance(log):
            self.report.add("provenance", item)
        for item in _headline(log, log.runs):
            self.report.add("headline", item)
        found = profile(log.runs)
        if found is not None:
            table, figure = found
            self.report.add("profile", figure)
            self.report.add("profile", table)
        cost = _cost(log, log.runs)
        if cost is not None:
            self.report.add("cost", cost)
        self.runs += log.runs

    def add_json(self, path: Path) -> None:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as error:
            raise ValueError(f"INPUT {path}: not JSON ({error})") from None
        if isinstance(data, dict) and {"mechanisms", "configurations", "attribution"} <= set(data):
            self.add_diagnosis(path, data)
        else:
            self.report.add("files", Text(path.name, clip(json.dumps(data, indent=2),
                                                          TEXT_BYTES)))

    def add_figure(self, section: str, path: Path, title: str, note: str = "") -> None:
        size = path.stat().st_size
        if size > PNG_BYTES or self.figure_bytes + size > FIGURE_BYTES:
            self.report.notes.append(f"figure {path} ({size:,} bytes) is not inlined (caps: "
                                     f"{PNG_BYTES:,} bytes per figure, {FIGURE_BYTES:,} in all)")
            return
        self.figure_bytes += size
        self.report.add(section, Figure(title, path.read_bytes(), note))

    def add_diagnosis(self, path: Path, data: dict[str, Any]) -> None:
        r = self.report
        r.add("provenance", Facts(f"Diagnosis {path}", tuple(
            [("env", data.get("env")), *_policy_items(data.get("policy")),
             ("episodes", data.get("episodes")),
             *_provenance_items(data.get("provenance") or {})])))
        for item in verdict_items(data):
            r.add("verdict", item)
        mechanisms = data.get("mechanisms") or []
        if mechanisms:
            keys = ["name", *(k for k in mechanisms[0] if k not in ("name", "params")),
                    "params"]
            r.add("diagnosis", Table("Mechanisms, best first", ("rank", *keys), tuple(
                (rank, *(_text(m.get(k)) for k in keys))
                for rank, m in enumerate(mechanisms, start=1))))
        attribution = data.get("attribution") or {}
        if attribution:
            r.add("diagnosis", Table("Attribution, most frequent first", ("category", "count"),
                                     tuple((k, _text(v)) for k, v in _by_count(attribution))))
        png = path.with_name(DIAGNOSIS_PNG)
        if png.is_file():
            self.add_figure("profile", png, "Success per battery configuration: the agent "
                            "over the best mechanisms' predicted 95% bands",
                            note=f"{png.name}, drawn by analysis/diagnose/report.py")
        rows = []
        for c in data.get("configurations") or []:
            n, k = c.get("episodes"), c.get("successes")
            if not isinstance(n, int) or not isinstance(k, int) or n <= 0:
                continue
            low, high = wilson_interval(k, n)
            rows.append((_configuration_label(c.get("kwargs") or {}), n, k, f"{k / n:.3f}",
                         f"[{float(low):.3f}, {float(high):.3f}]",
                         _text(c.get("without_outcome"))))
        if rows:
            r.add("profile", Table("Success per battery configuration",
                                   ("configuration", "episodes", "successes", "success",
                                    "Wilson 95%", "without outcome"), tuple(rows)))

    def add_directory(self, path: Path) -> None:
        files = sorted(p for p in path.iterdir() if p.is_file() and p.name != REPORT_NAME)
        if not files:
            raise ValueError(f"INPUT {path}: an empty directory (no study outputs)")
        for file in files:
            if file.name == PROVENANCE_NAME:
                data = json.loads(file.read_text(encoding="utf-8"))
                self.report.add("provenance", Facts(f"Study {path}", tuple(
                    [*_run_items(data.get("run")), *_provenance_items(data)])))
            elif file.suffix == ".jsonl" and not holds_an_entry(file):
                self.report.notes.append(f"{file}: not a run log (no JSONL line with a "
                                         "\"type\"), so not read here")
            elif file.suffix == ".jsonl":
                self.add_log(file)
            elif file.name == DIAGNOSIS_NAME:
                self.add_json(file)
            elif file.suffix == ".png" and file.name != DIAGNOSIS_PNG:
                named = png_title(file)
                self.add_figure("profile", file, named or file.name, file.name if named else "")
            elif file.name.endswith(TABLES_SUFFIX):
                markdown_name = file.name.removesuffix(TABLES_SUFFIX) + ".md"
                for item in study_table_items(markdown_name, read_study_tables(file)):
                    self.report.add("tables", item)
            elif (file.suffix == ".md" and file.name != "diagnosis.md"
                  and not tables_path(file).is_file()):
                self.report.notes.append(
                    f"{file}: no {tables_path(file).name} beside it (a study written before "
                    "studies wrote their tables as data), so its tables are not shown")
            elif file.suffix == ".csv":
                self.report.add("files", csv_table(file))
            elif file.suffix == ".json":
                self.add_json(file)

    def finish(self) -> Report:
        if any(run.records for run in self.runs):
            self.report.viewer = viewer_data(self.runs)
            self.report.notes += self.report.viewer["notes"]
        return self.report


def png_title(path: Path) -> str | None:
    """The title diagym's figures carry in their PNG text (analysis.plotting.name_figure), on
    one line and at most TITLE_CHARS; None for a PNG without one or not readable as PNG.
    Pillow reads the chunks before the image data only, each bounded by its text-chunk
    limit; a header declaring a decompression bomb is refused before any pixel is read."""
    from PIL import Image

    try:
        with Image.open(path, formats=["PNG"]) as image:
            title = image.info.get(TITLE_KEY)
    # UnidentifiedImageError is an OSError; DecompressionBombError is neither
    except (OSError, ValueError, Image.DecompressionBombError):
        return None
    if not isinstance(title, str):
        return None
    return " ".join(title.split())[:TITLE_CHARS] or None


def csv_table(path: Path) -> Table:
    with path.open(newline="", encoding="utf-8") as source:
        reader = csv.reader(source)
        header = next(reader, [])
        rows, total = [], 0
        for row in reader:
            total += 1
            if len(rows) < CSV_ROWS:
                rows.append(tuple(row))
    note = f"the first {len(rows)} of {total:,} rows" if total > len(rows) else ""
    return Table(path.name, tuple(header), tuple(rows), note=note)


def study_table_items(name: str, blocks: Sequence[Block]) -> list[Table | Text]:
    """A study's tables (analysis/studies/study_tables.py) as report items in order: each
    heading titles the item after it (the first is titled by the Markdown's name), a table's
    caption is its note and any other paragraph is text."""
    items: list[Table | Text] = []
    heading = [name]

    def title() -> str:
        text = " / ".join(heading)
        heading.clear()
        return text

    for block in blocks:
        if isinstance(block, Heading):
            heading.append(block.text)
        elif isinstance(block, StudyTable):
            items.append(Table(title(), block.headers, block.rows, note=block.caption))
        elif block.strip():
            items.append(Text(title(), block, preformatted=False))
    return items


def build(inputs: Iterable[Path]) -> Report:
    """The Report of `inputs` (module docstring); ValueError, one line, for an input that is
    none of the kinds."""
    builder = Builder()
    for path in inputs:
        builder.add(Path(path))
    return builder.finish()
