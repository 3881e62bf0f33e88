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

from diagym.analysis.studies.rcwt.fits import (
    PARAM_NAMES,
    FitResult,
    best_family,
    bootstrap_theta,
    fit_all,
    theta,
)
from diagym.controllers.provenance import write_provenance

CSV_FIELDS = ("model", "p", "score", "order", "q", "r", "u", "c", "seed", "category")


def write_csv(records: Iterable[Mapping[str, Any]], path: Path) -> Path:
    """One row per call with CSV_FIELDS (model, p, score, order, ...): the input of
    read_rows."""
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


def summarise_fits(records: Sequence[Mapping[str, Any]], window: int,
                   resamples: int = 1000, seed: int = 0) -> dict[str, Any]:
    """fit_table of the calls (each target q a cell) plus, per model, theta's
    order-stratified bootstrap interval and the answer categories."""
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


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a CSV with header model,p,score[,order][,q]; p, score and q as floats (q, the
    target ratio of a sweep's row, names its cell for the cell-mean R^2)."""
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle)
        missing = {"model", "p", "score"} - set(reader.fieldnames or ())
        if missing:
            raise ValueError(f"{path}: missing column(s) {sorted(missing)}")
        rows = []
        for line, raw in enumerate(reader, start=2):
            try:
                row: dict[str, Any] = {"model": raw["model"], "p": float(raw["p"]),
                                       "score": float(raw["score"])}
            except (TypeError, ValueError) as error:
                raise ValueError(f"{path}:{line}: bad p/score value") from error
            if raw.get("order"):
                row["order"] = raw["order"]
            if raw.get("q"):
                try:
                    row["q"] = float(raw["q"])
                except ValueError as error:
                    raise ValueError(f"{path}:{line}: bad q value") from error
            rows.append(row)
    return rows


def _group(rows: Iterable[Mapping[str, Any]]
           ) -> dict[str, tuple[list[float], list[float], list[float] | None]]:
    """Per model: p, score, and the rows' q as cell labels (None unless every row has q)."""
    groups: dict[str, tuple[list[float], list[float], list[Any]]] = {}
    for row in rows:
        ps, ss, qs = groups.setdefault(str(row["model"]), ([], [], []))
        ps.append(float(row["p"]))
        ss.append(float(row["score"]))
        qs.append(row.get("q"))
    return {model: (ps, ss, qs if all(q is not None for q in qs) else None)
            for model, (ps, ss, qs) in groups.items()}


def _family_entry(fit: FitResult, best_aic: float) -> dict[str, Any]:
    delta = fit.aic - best_aic if math.isfinite(fit.aic) and math.isfinite(best_aic) else math.nan
    return {
        "identified": fit.identified,
        "not_identified": list(fit.reasons),
        "params": ({k: _finite(v) for k, v in fit.params.items()} if fit.identified
                   else None),
        "k": fit.k,
        "r2": _finite(fit.r2),
        "r2_cells": _finite(fit.r2_cells),
        "rmse": _finite(fit.rmse),
        "aic": _finite(fit.aic),
        "delta_aic": _finite(delta),
    }


def fit_table(rows: Iterable[Mapping[str, Any]], window: float) -> dict[str, dict[str, Any]]:
    """Per model (in order of first appearance): the logistic's p0, k, R0 and theta when it is
    identified (else None, with the reasons under "not_identified"), its R^2 (rows and cell
    means; a `q` in every row of a model names the cells), every family's R^2 / RMSE / AIC /
    delta AIC and params (None when not identified), and the family with the lowest AIC.
    Non-finite numbers become None so the result is strict JSON. An `order`
    column, if present, does not affect the point fits."""
    table: dict[str, dict[str, Any]] = {}
    for model, (ps, ss, qs) in _group(rows).items():
        fits = fit_all(ps, ss, int(window), qs)
        lg = fits["logistic"]
        best = best_family(fits)
        best_aic = fits[best].aic if best is not None else math.nan

        def shown(name: str, fit: FitResult = lg) -> float | None:
            return _finite(fit.params[name]) if fit.identified else None

        table[model] = {
            "identified": lg.identified,
            "not_identified": list(lg.reasons),
            "p0": shown("p0"),
            "k": shown("k"),
            "R0": shown("R0"),
            "theta": _finite(theta(lg.params["p0"], window)) if lg.identified else None,
            "r2": _finite(lg.r2),
            "r2_cells": _finite(lg.r2_cells),
            "n": lg.n,
            "best_family": best,
            "best_family_identified": fits[best].identified if best is not None else False,
            "families": {name: _family_entry(fit, best_aic) for name, fit in fits.items()},
        }
    return table


def plot_fits(rows: Iterable[Mapping[str, Any]], window: float, out_png: str | Path) -> Path:
    """One panel per model: scores against p, every family's fitted curve (dotted when not
    identified), and a vertical line at the logistic p0 annotated with theta when it is
    identified. Uses the Agg canvas directly (no pyplot state), so it is safe in headless
    and threaded runs."""
    from diagym.analysis.plotting import CITATIONS, add_caption, name_figure, new_figure, save

    groups = _group(rows)
    n_models = max(len(groups), 1)
    # save() measures the picture's box before drawing: a layout engine that moves the axes
    # while drawing (constrained_layout) cut the title, the axis label and the data's edge.
    fig, axes = new_figure(n_models, 4.2)
    fig.subplots_adjust(wspace=0.35)  # a panel's y label clear of its left neighbour
    styles = {"logistic": "-", "power_law": "--", "exponential": "-.", "quadratic": ":",
              "piecewise_linear": (0, (5, 1, 1, 1))}
    for ax, (model, (ps, ss, qs)) in zip(axes, groups.items(), strict=False):
        p_arr, s_arr = np.asarray(ps), np.asarray(ss)
        ax.scatter(p_arr, s_arr, color="black", s=18, zorder=3, label="data")
        fits = fit_all(p_arr, s_arr, int(window), qs)
        finite = p_arr[np.isfinite(p_arr)]
        lo = float(finite.min()) if finite.size else 0.0
        hi = float(finite.max()) if finite.size else 1.0
        grid = np.linspace(lo, hi if hi > lo else lo + 1.0, 400)
        for name, fit in fits.items():
            if math.isfinite(fit.params[PARAM_NAMES[name][0]]):
                r2 = f"R²={fit.r2:.3f}" if math.isfinite(fit.r2) else "no R²: flat scores"
                note = "" if fit.identified else ", not identified"
                ax.plot(grid, fit.predict(grid), linestyle=styles[name], linewidth=1.2,
                        alpha=1.0 if fit.identified else 0.4,
                        label=f"{name} ({r2}{note})")
        lg = fits["logistic"]
        if lg.identified:
            p0 = lg.params["p0"]
            ax.axvline(p0, color="grey", linewidth=0.8)
            ax.annotate(f"p0 = {p0:.3f}\nθ = {theta(p0, window):.0f} tokens",
                        xy=(p0, 0.5), xytext=(-6, 0), textcoords="offset points",
                        ha="right", fontsize=8)
        ax.set_title(model, fontsize=10)
        ax.set_xlabel(f"realised coordination share p = c/W (W = {window:g})")
        ax.set_ylabel("effective score R")
        bottom, top = ax.get_ylim()  # never a 1e-12 range with an offset label, for flat scores
        ax.set_ylim(min(bottom, -0.05), max(top, 1.05))
        ax.ticklabel_format(axis="y", useOffset=False)
        # below its own panel: a legend beside the last panel would not say which panel's
        # R² it lists
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(0.0, -0.2), frameon=False)
    cells = sum(len(ps) for ps, _, _ in groups.values())
    add_caption(fig, f"Effective score against the realised coordination share, {cells} sweep "
                     f"cells over {len(groups)} model(s) at W = {window:g} tokens, each family "
                     "fitted by least squares (analysis/studies/rcwt/fits.py); faint curves are "
                     f"not identified. {CITATIONS['000']}", width=60 * n_models)
    name_figure(fig, f"Effective score against coordination share at W = {window:g}, "
                     "with each family's fit")
    return save(fig, out_png)


@dataclass(frozen=True)
class SweepOutputs:
    csv: Path
    fits_json: Path
    plot: Path
    fits: dict[str, Any]


def write_outputs(records: Sequence[Mapping[str, Any]], out: Path, window: int,
                  resamples: int = 1000) -> SweepOutputs:
    """DIR/sweep.csv, DIR/fits.json (summarise_fits) and DIR/fits.png (plot_fits)."""
    out = Path(out)
    csv_path = write_csv(records, out / "sweep.csv")
    fits = summarise_fits(records, window, resamples=resamples)
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
