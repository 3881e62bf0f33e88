"""RCWT outputs: the sweep CSV, the per-cell table, the fits with theta's bootstrap
interval, the plot, and the text tables `diagym rcwt sweep / fit` print."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from controllers.provenance import write_provenance

CSV_FIELDS = ("model", "p", "score", "order", "q", "r", "u", "c", "seed", "category")


def write_csv(records: Iterable[Mapping[str, Any]], path: Path) -> Path:
    """One row per call with CSV_FIELDS (model, p, score, order, ...): the input of
    analysis.fits.read_rows."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_FIELDS, extrasaction="ignore")
        writer.writeheader()
        for record in records:
            writer.writerow({k: record[k] for k in CSV_FIELDS})
    return path


def cell_table(records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per (model, order, q): mean p, mean r, mean score and the call count, in sweep order."""
    cells: dict[tuple[str, str, float], list[Mapping[str, Any]]] = {}
    for record in records:
        cells.setdefault((record["model"], record["order"], record["q"]), []).append(record)
    rows = []
    for (model, order, q), group in cells.items():
        rows.append({"model": model, "order": order, "q": q, "n": len(group),
                     "p": float(np.mean([g["p"] for g in group])),
                     "r": float(np.mean([g["r"] for g in group])),
                     "score": float(np.mean([g["score"] for g in group]))})
    return rows


def summarise(records: Sequence[Mapping[str, Any]], window: int,
              resamples: int = 1000, seed: int = 0) -> dict[str, Any]:
    """fit_table of the calls (each target q a cell) plus, per model, theta's
    order-stratified bootstrap interval and the answer categories."""
    from analysis.fits import bootstrap_theta, fit_table

    rows = [{"model": r["model"], "p": r["p"], "score": r["score"], "order": r["order"],
             "q": r["q"]} for r in records]
    table = fit_table(rows, window)
    for model, entry in table.items():
        mine = [r for r in records if r["model"] == model]
        boot = bootstrap_theta([r["p"] for r in mine], [r["score"] for r in mine],
                               [r["order"] for r in mine], window, resamples=resamples,
                               seed=seed, cells=[r["q"] for r in mine])
        entry["bootstrap"] = {
            "resamples": resamples,
            "p0_interval": [_finite(v) for v in boot.p0_interval],
            "theta_interval": [_finite(v) for v in boot.theta_interval],
        }
        categories: dict[str, int] = {}
        for r in mine:
            categories[str(r["category"])] = categories.get(str(r["category"]), 0) + 1
        entry["categories"] = dict(sorted(categories.items()))
    return table


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


@dataclass(frozen=True)
class SweepOutputs:
    csv: Path
    fits_json: Path
    plot: Path
    fits: dict[str, Any]


def write_outputs(records: Sequence[Mapping[str, Any]], out: Path, window: int,
                  resamples: int = 1000) -> SweepOutputs:
    """DIR/sweep.csv, DIR/fits.json (summarise) and DIR/fits.png (analysis.fits.plot_fits)."""
    from analysis.fits import plot_fits

    out = Path(out)
    csv_path = write_csv(records, out / "sweep.csv")
    fits = summarise(records, window, resamples=resamples)
    fits_path = out / "fits.json"
    fits_path.write_text(json.dumps(fits, indent=2) + "\n")
    rows = [{"model": r["model"], "p": r["p"], "score": r["score"], "q": r["q"]}
            for r in records]
    png = plot_fits(rows, window, out / "fits.png")
    write_provenance(out, {"command": "rcwt sweep", "window": window, "resamples": resamples,
                           "models": sorted({str(r["model"]) for r in records}),
                           "calls": len(records)})
    return SweepOutputs(csv_path, fits_path, png, fits)


def _num(value: Any, spec: str) -> str:
    return "nan" if value is None else format(value, spec)


def _theta_text(entry: Mapping[str, Any]) -> str:
    if entry["theta"] is None:
        return "not identified (" + "; ".join(entry["not_identified"]) + ")"
    return f"{entry['theta']:.1f}"


def format_fit_table(table: dict[str, Any]) -> str:
    """Per model: the logistic's p0, k, theta and R^2 (or why it is not identified), then
    every family's R^2, AIC, delta AIC and parameters, and the family with the lowest AIC."""
    lines = [f"{'model':<20} {'p0':>7} {'k':>8} {'r2':>7}  theta"]
    for model, entry in table.items():
        lines.append(f"{model:<20} {_num(entry['p0'], '.4f'):>7} {_num(entry['k'], '.2f'):>8} "
                     f"{_num(entry['r2'], '.4f'):>7}  {_theta_text(entry)}")
    for model, entry in table.items():
        lines.append(f"\n{model}: {'family':<17} {'k':>2} {'R^2':>8} {'AIC':>9} {'dAIC':>7}  "
                     "parameters")
        for name, fam in entry["families"].items():
            if fam["identified"]:
                shown = ", ".join(f"{k} {_num(v, '.4g')}" for k, v in fam["params"].items())
            else:
                shown = "not identified: " + "; ".join(fam["not_identified"])
            lines.append(f"  {name:<22} {fam['k']:>2} {_num(fam['r2'], '.4f'):>8} "
                         f"{_num(fam['aic'], '.2f'):>9} {_num(fam['delta_aic'], '.2f'):>7}  "
                         f"{shown}")
        best = entry["best_family"]
        if best is not None:
            note = "" if entry["best_family_identified"] else " (not identified)"
            lines.append(f"  lowest AIC: {best}{note}")
    return "\n".join(lines)


def format_sweep(cells: list[dict[str, Any]], fits: dict[str, Any]) -> str:
    """Per order: q, mean p, mean r and mean score per cell; then theta and its interval."""
    lines = []
    for order in dict.fromkeys(c["order"] for c in cells):
        lines.append(f"{order}\n{'q':>7} {'p':>7} {'r':>8} {'score':>7} {'n':>5}")
        for c in (c for c in cells if c["order"] == order):
            lines.append(f"{100 * c['q']:>6.1f}% {c['p']:>7.4f} {c['r']:>8.1f} "
                         f"{c['score']:>7.3f} {c['n']:>5}")
    for model, entry in fits.items():
        lo, hi = entry["bootstrap"]["theta_interval"]
        cats = ", ".join(f"{k} {v}" for k, v in entry["categories"].items())
        if entry["theta"] is None:
            lines.append(f"{model}: theta {_theta_text(entry)}; R^2 "
                         f"{_num(entry['r2'], '.4f')}; answers: {cats}")
            continue
        lines.append(f"{model}: theta {_num(entry['theta'], '.1f')} tokens (95% bootstrap, "
                     f"order strata: [{_num(lo, '.1f')}, {_num(hi, '.1f')}]); p0 "
                     f"{_num(entry['p0'], '.4f')}, k {_num(entry['k'], '.2f')}, R^2 "
                     f"{_num(entry['r2'], '.4f')} over calls, {_num(entry['r2_cells'], '.4f')} "
                     f"over cell means; lowest AIC: {entry['best_family']}; answers: {cats}")
    return "\n".join(lines)
