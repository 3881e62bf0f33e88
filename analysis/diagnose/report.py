"""A diagnosis as the issue's output contract (JSON), a Markdown report and a PNG, so scripts
read the same facts a person reads.

The JSON keys are the contract's and no more: env, policy, episodes, headline (one line:
nothing to fit, the best mechanism and that it fits, or "outside the family"), fit (the
absolute fit test, honesty.FitTest), failures (the check of the failed calls by cause and
step against the hypothesis's, failure_check.FailureCheck; null with too few failed calls),
mixture (components and weights of a per-episode
mixture of two mechanisms when it beats the single best by the penalised margin of
analysis/diagnose/mixture.py, else null), evidence (episodes with and without an env outcome, the
invalid replies by category), invalid (that tally alone), configurations (per battery
configuration: kwargs, episodes, successes, the episodes without an env outcome, and the
outcome counts as rows), attribution (counts), attribution_shares (the likelihood shares of
the wrong slots), attribution_vs_chance (per cause: observed, expected_if_guessing, share),
mechanisms (the TOP best first, none when nothing was fitted), verdicts, forecasts (with
--forecast), design (adaptive), and provenance. The PNG draws the agent's success per
configuration over the predicted success of the TOP_DRAWN best mechanisms, each with its
95% binomial band for that configuration's episode count: where the agent falls outside a
mechanism's band, the mechanism does not explain it.

Either family's diagnosis (analysis/diagnose/contract.py `Diagnosis`) goes through the same
functions, `to_json`, `to_markdown`, `summary` and `write`, which pick the family's format
from FORMATS by `diagym.envs.family_of` of its env, as the CLI picks how to play it. A DACS
diagnosis (analysis/diagnose/dacs/diagnosis.py `DacsDiagnosis`, the DACS contract's keys
already) gains provenance only; its Markdown holds the headline, the fit test and the invalid
tally, the mixture, the verdicts and the attribution beside what guessing gives, each written
by the lines the workflow report writes them with (`head_lines`, `fit_lines`,
`mixture_lines`, `verdict_lines`, `attribution_lines`; the terminal summary of both is
`summary_lines`), and the reader fits; there is no PNG (the reader fits are exact
likelihoods, with no predicted bands to draw).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import binom

from diagym import envs
from diagym.analysis.diagnose.attribution import COUNT_KEYS
from diagym.analysis.diagnose.contract import Diagnosis as AnyDiagnosis
from diagym.analysis.diagnose.dacs.diagnosis import DacsDiagnosis
from diagym.analysis.diagnose.honesty import FitTest
from diagym.analysis.diagnose.likelihood import Fit, outcome_count
from diagym.analysis.diagnose.run import Configuration, Diagnosis, label
from diagym.analysis.policy_label import policy_label
from diagym.controllers.provenance import provenance
from diagym.envs.workflow.layout import FAILURE_NAMES

TOP = 10
TOP_DRAWN = 3
FILES = ("diagnosis.json", "diagnosis.md", "diagnosis.png")


def _outcome_rows(configuration: Configuration) -> list[dict[str, Any]]:
    """The non-zero outcome counts as (first_failure, completed, errors, episodes) rows."""
    spec = configuration.spec
    counts = configuration.counts
    errors_levels, completed_levels = spec.error_allowance + 2, spec.n_ops + 1
    rows = []
    for code in np.flatnonzero(counts).tolist():
        errors = code % errors_levels
        completed = (code // errors_levels) % completed_levels
        failure = code // (errors_levels * completed_levels)
        rows.append({"first_failure": FAILURE_NAMES[failure], "completed": completed,
                     "errors": errors, "episodes": int(counts[code])})
    return rows


def _workflow_json(diagnosis: Diagnosis) -> dict[str, Any]:
    """The workflow output contract but its provenance (module docstring)."""
    configurations = [{
        "kwargs": c.spec.as_dict(),
        "episodes": len(c.episodes),
        "successes": int(c.episodes.columns["success"].sum()),
        "without_outcome": int((~c.ended_by_env).sum()),
        "outcomes": _outcome_rows(c),
    } for c in diagnosis.configurations]
    mechanisms = [] if diagnosis.evidence.nothing_to_fit else [{
        "name": f.mechanism.name, "family": f.mechanism.family,
        "params": dict(f.mechanism.params), "epsilon": f.epsilon,
        "epsilon_interval": None if f.epsilon_interval is None else
        [round(e, 4) for e in f.epsilon_interval],
        "log_likelihood": f.log_likelihood, "log_lr_to_best": f.log_lr_to_best,
    } for f in diagnosis.ranked[:TOP]]
    design = ({} if diagnosis.design is None else
              {"design": diagnosis.design.to_json([label(s) for s in diagnosis.model.battery])})
    return {
        **design,
        "env": diagnosis.env,
        "policy": diagnosis.policy,
        "episodes": diagnosis.episodes,
        "headline": diagnosis.headline,
        "fit": None if diagnosis.fit is None else diagnosis.fit.to_json(),
        "failures": None if diagnosis.failures is None else diagnosis.failures.to_json(),
        "mixture": None if diagnosis.mixture is None else diagnosis.mixture.to_json(),
        "evidence": diagnosis.evidence.to_json(),
        "invalid": dict(sorted(diagnosis.evidence.invalid.items())),
        "configurations": configurations,
        "attribution": {key: int(diagnosis.tally.counts[key]) for key in COUNT_KEYS},
        "attribution_shares": {key: round(share, 3)
                               for key, share in diagnosis.tally.weighted.items()},
        "attribution_vs_chance": {key: c.to_json() for key, c in diagnosis.chance.items()},
        "mechanisms": mechanisms,
        "verdicts": dict(diagnosis.verdicts),
        "forecasts": [f.to_json() for f in diagnosis.forecasts],
    }


def fit_lines(test: FitTest | None, invalid: Mapping[str, int],
              replayed: str = "replayed") -> list[str]:
    """The fit test's paragraph and the tally of episodes without an env outcome, in the
    Markdown of either family's diagnosis."""
    lines = []
    if test is not None:
        lines += ["## Fit test", "",
                  f"{test.hypothesis} {replayed} {test.replicates} times with the agent's "
                  f"episode counts: the agent's G-squared {test.statistic:.1f}, the replicates' "
                  f"median {test.expected:.1f}, {test.p_text()}: **{test.verdict}**."
                  + (f" Outside their 95% band: {', '.join(test.outside)}." if test.outside
                     else ""), ""]
    if invalid:
        lines += ["Episodes without an env outcome (no evidence): " + ", ".join(
            f"{n} {key}" for key, n in sorted(invalid.items())) + ".", ""]
    return lines


def failure_lines(diagnosis: Diagnosis) -> list[str]:
    """The failure check's paragraph (analysis/diagnose/failure_check.py)."""
    check = diagnosis.failures
    if check is None:
        return []
    verdict = "do not fit" if check.rejected else "fit"
    return ["## Failure check", "",
            f"{check.hypothesis} played the agent's configurations on fresh seeds: its "
            f"{check.hypothesis_failures} failed calls against the agent's "
            f"{check.agent_failures}, split by cause and by step: G-squared "
            f"{check.statistic:.1f}, the {check.permutations} permutations' median "
            f"{check.expected:.1f}, {check.p_text()}: the failures **{verdict}**; most "
            f"different: {check.words()}.", ""]


def head_lines(policy: Any, env: str, headline: str, counted: str) -> list[str]:
    """The title, the headline and what was counted, in either family's Markdown."""
    return [f"# Diagnosis of {policy_label(policy)} on {env}", "",
            f"**{headline}**", "", counted, ""]


def mixture_lines(mixture: Mapping[str, Any] | None) -> list[str]:
    """The reported per-episode mixture (mixture.Mixture's JSON), in either family's
    Markdown: its components and weights, and its gain over the single best against the
    margin it cleared."""
    if mixture is None:
        return []
    parts = " and ".join(f"{name} ({weight:.0%})" for name, weight in
                         zip(mixture["components"], mixture["weights"], strict=True))
    return ["## Mixture", "", f"A per-episode mixture of {parts} beats the single best by "
            f"log-LR {mixture['gain_over_single']:.1f} (the margin "
            f"{mixture['margin']:.1f}: log episodes + log pairs weighed).", ""]


def verdict_lines(verdicts: Mapping[str, str]) -> list[str]:
    return ["## Verdicts", "", *(f"- {text}" for text in verdicts.values())]


def attribution_lines(title: str, unit: str,
                      rows: Sequence[tuple[str, int, float | None, float | None]]) -> list[str]:
    """The attribution table of either family: per category its count, what a uniform
    guesser would show on the same decisions and the likelihood share (None: not weighed)."""
    lines = ["", f"## {title}", "",
             f"| category | {unit} | a uniform guesser would show | likelihood share |",
             "|---|---:|---:|---:|"]
    for key, count, chance, share in rows:
        lines.append(f"| {key} | {count} | " + ("-" if chance is None else f"{chance:.1f}")
                     + " | " + ("-" if share is None else f"{share:.1f}") + " |")
    return lines


def summary_lines(policy: Any, env: str, counted: str, headline: str,
                  details: Sequence[str], verdicts: Mapping[str, str]) -> list[str]:
    """The terminal summary of either family: the run, the headline, the family's details
    (the best fit against the runner-up, ...), and the verdicts."""
    return [f"{policy_label(policy)} on {env}: {counted}", headline, *details,
            *verdicts.values()]


def predicted_success(diagnosis: Diagnosis, fitted: Fit) -> list[float]:
    """The mechanism's simulated success probability on each played configuration."""
    model = diagnosis.model
    row = model.index[fitted.mechanism.name]
    out = []
    for c in diagnosis.configurations:
        spec = c.spec
        codes = np.arange(outcome_count(spec))
        completed = (codes // (spec.error_allowance + 2)) % (spec.n_ops + 1)
        log_p = model.log_p[model.battery.index(spec)][row]
        out.append(float(np.exp(log_p[completed == spec.n_ops]).sum()))
    return out


def _workflow_markdown(diagnosis: Diagnosis) -> str:
    """The ranked mechanisms, the attribution counts and the verdicts."""
    lines = head_lines(diagnosis.policy, diagnosis.env, diagnosis.headline,
                       f"{diagnosis.episodes} episodes over {len(diagnosis.configurations)} "
                       "battery configurations.")
    lines += fit_lines(diagnosis.fit, diagnosis.evidence.invalid)
    lines += failure_lines(diagnosis)
    lines += mixture_lines(None if diagnosis.mixture is None else diagnosis.mixture.to_json())
    lines += verdict_lines(diagnosis.verdicts)
    lines += ["", "## Mechanisms, best first", "",
              "| rank | mechanism | plays as | epsilon | log-likelihood | log-LR to best |",
              "|---:|---|---|---:|---:|---:|"]
    for rank, f in enumerate(diagnosis.ranked[:TOP], start=1):
        lines.append(f"| {rank} | {f.mechanism.name} | {', '.join(f.aliases) or '-'} | "
                     f"{f.epsilon:.3f} | {f.log_likelihood:.1f} | {f.log_lr_to_best:.1f} |")
    lines += attribution_lines("Attribution of the failed calls", "calls", [
        (key, diagnosis.tally.counts[key],
         None if key not in diagnosis.chance else diagnosis.chance[key].expected_if_guessing,
         diagnosis.tally.weighted.get(key)) for key in COUNT_KEYS])
    if diagnosis.forecasts:
        lines += ["", "## Forecasts", "", "| configuration | success | interval |",
                  "|---|---:|---|"]
        lines += [f"| {json.dumps(f.kwargs, sort_keys=True)} | {f.success:.3f} | "
                  f"[{f.interval[0]:.3f}, {f.interval[1]:.3f}]{f.note()} |"
                  for f in diagnosis.forecasts]
    lines += ["", f"{diagnosis.tally.successes} of {diagnosis.tally.decisions} calls succeeded "
              "(not evidence).", "", "## Success per configuration", "",
              "| configuration | episodes | successes |", "|---|---:|---:|"]
    for c in diagnosis.configurations:
        successes = int(c.episodes.columns["success"].sum())
        lines.append(f"| {label(c.spec)} | {len(c.episodes)} | {successes} |")
    return "\n".join(lines) + "\n"


def plot(diagnosis: Diagnosis, path: Path) -> None:
    """The agent's success per configuration over the TOP_DRAWN mechanisms' 95% bands."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    configurations = diagnosis.configurations
    x = np.arange(len(configurations))
    n = np.array([len(c.episodes) for c in configurations])
    agent = np.array([c.episodes.columns["success"].mean() if len(c.episodes) else np.nan
                      for c in configurations])
    figure, axes = plt.subplots(figsize=(10, 5))
    for offset, fitted in zip((-0.2, 0.0, 0.2), diagnosis.ranked[:TOP_DRAWN], strict=False):
        p = np.array(predicted_success(diagnosis, fitted))
        low, high = binom.interval(0.95, n, p)
        # the band's quantiles are whole episodes: p may sit a rounding outside them
        yerr = np.clip([p - low / n, high / n - p], 0.0, None)
        axes.errorbar(x + offset, p, yerr=yerr, fmt="s", capsize=3,
                      alpha=0.7, label=f"{fitted.mechanism.name} (log-LR "
                                       f"{fitted.log_lr_to_best:.1f}), 95% band")
    axes.plot(x, agent, "ko", markersize=8, label="agent")
    axes.set_xticks(x, [f"{label(c.spec)}\n({len(c.episodes)} ep.)" for c in configurations],
                    rotation=45, ha="right", fontsize=8)
    axes.set_ylabel("success rate")
    axes.set_ylim(-0.05, 1.05)
    axes.set_title("Success per battery configuration: the agent against the best mechanisms")
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    figure.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(figure)


def _workflow_summary(diagnosis: Diagnosis) -> list[str]:
    """The terminal summary: the run, the headline, the best fit against the runner-up, the
    verdicts, and each forecast."""
    details = []
    if not diagnosis.evidence.nothing_to_fit and len(diagnosis.ranked) > 1:
        runner_up = diagnosis.ranked[1]
        best = diagnosis.ranked[0]
        details.append(f"ranked: {best.mechanism.name}"
                       + (f" (plays as {', '.join(best.aliases)})" if best.aliases else "")
                       + f"; next {runner_up.mechanism.name} at log-LR "
                         f"{runner_up.log_lr_to_best:.1f}")
    counted = f"{diagnosis.episodes} episodes over {len(diagnosis.configurations)} configurations"
    lines = summary_lines(diagnosis.policy, diagnosis.env, counted, diagnosis.headline,
                          details, diagnosis.verdicts)
    for predicted in diagnosis.forecasts:
        low, high = predicted.interval
        lines.append(f"forecast {json.dumps(predicted.kwargs, sort_keys=True)}: success "
                     f"{predicted.success:.3f} [{low:.3f}, {high:.3f}]{predicted.note()}")
    return lines


def _workflow_figures(diagnosis: Diagnosis, directory: Path) -> list[Path]:
    path = Path(directory) / FILES[2]
    plot(diagnosis, path)
    return [path]


def _dacs_json(result: DacsDiagnosis) -> dict[str, Any]:
    return dict(result)


def _dacs_markdown(result: DacsDiagnosis) -> str:
    """The verdicts, the ranked reader fits, the attribution of the answers and the
    configurations."""
    lines = head_lines(result["policy"], result["env"], result["headline"],
                       f"{result['episodes']} episodes, {result['decisions']} answers, over "
                       f"{len(result['configurations'])} battery configurations.")
    lines += fit_lines(None if result["fit"] is None else FitTest.from_json(result["fit"]),
                       result["invalid"], "redrawn on the agent's windows")
    lines += mixture_lines(result.get("mixture"))
    lines += verdict_lines(result["verdicts"])
    lines += ["", "## Readers, best first", "",
             "| rank | reader | plays as | epsilon | interval | log-likelihood | "
             "log-LR to best |", "|---:|---|---|---:|---|---:|---:|"]
    for rank, m in enumerate(result["mechanisms"], start=1):
        low, high = m["params"]["epsilon_interval"]
        lines.append(f"| {rank} | {m['name']} | {', '.join(m['aliases']) or '-'} | "
                     f"{m['epsilon']:.2f} | [{low:.2f}, {high:.2f}] | "
                     f"{m['log_likelihood']:.1f} | {m['log_lr_to_best']:.1f} |")
    chance = result["attribution_vs_chance"]
    lines += attribution_lines("Attribution of the answers", "answers", [
        (key, count, chance[key]["expected_if_guessing"] if key in chance else None,
         result["attribution_weights"].get(key))
        for key, count in result["attribution"].items()])
    lines += ["", f"The env calls {result['env_contaminated']} answers contaminated (another "
              "agent holds the value).", "", "## Configurations", ""]
    lines += [f"- {json.dumps(kwargs, sort_keys=True)}" for kwargs in result["configurations"]]
    return "\n".join(lines) + "\n"


def _dacs_summary(result: DacsDiagnosis) -> list[str]:
    """The terminal summary: the run, the headline, the best reader fit and the runner-up,
    the attribution, the verdicts."""
    details = []
    if result["mechanisms"]:
        best, *rest = result["mechanisms"]
        low, high = best["params"]["epsilon_interval"]
        runner_up = (f"; next {rest[0]['name']} at log-LR {rest[0]['log_lr_to_best']:.1f}"
                     if rest else "")
        details.append(f"best reader: {best['name']}"
                       + (f" (plays as {', '.join(best['aliases'])})" if best["aliases"]
                          else "")
                       + f", lapse epsilon {best['epsilon']:.2f} [{low:.2f}, {high:.2f}]"
                       + runner_up)
    details.append("answers: " + ", ".join(f"{key} {count}"
                                           for key, count in result["attribution"].items()))
    counted = (f"{result['episodes']} episodes, {result['decisions']} answers over "
               f"{len(result['configurations'])} configurations")
    return summary_lines(result["policy"], result["env"], counted, result["headline"],
                         details, result["verdicts"])


@dataclass(frozen=True)
class Format:
    """How one family's diagnosis is written: its contract (without provenance), its
    Markdown, its terminal summary and its figures (written into a directory)."""

    contract: Callable[[Any], dict[str, Any]]
    markdown: Callable[[Any], str]
    summary: Callable[[Any], list[str]]
    figures: Callable[[Any, Path], list[Path]]


FORMATS: dict[str, Format] = {
    envs.WORKFLOW: Format(_workflow_json, _workflow_markdown, _workflow_summary,
                          _workflow_figures),
    envs.DACS: Format(_dacs_json, _dacs_markdown, _dacs_summary, lambda _d, _path: []),
}


def _format(diagnosis: AnyDiagnosis) -> Format:
    return FORMATS[envs.family_of(diagnosis.env)]


def to_json(diagnosis: AnyDiagnosis) -> dict[str, Any]:
    """The output contract of the diagnosis's family, with provenance (module docstring)."""
    return {**_format(diagnosis).contract(diagnosis), "provenance": provenance()}


def to_markdown(diagnosis: AnyDiagnosis) -> str:
    return _format(diagnosis).markdown(diagnosis)


def summary(diagnosis: AnyDiagnosis) -> list[str]:
    """The lines `diagym diagnose` prints without --json."""
    return _format(diagnosis).summary(diagnosis)


def write(diagnosis: AnyDiagnosis, directory: Path) -> Sequence[Path]:
    """diagnosis.json, diagnosis.md and the family's figures (diagnosis.png) in
    `directory`."""
    json_path, md_path = (Path(directory) / name for name in FILES[:2])
    json_path.write_text(json.dumps(to_json(diagnosis), indent=2, sort_keys=True) + "\n",
                         encoding="utf-8")
    md_path.write_text(to_markdown(diagnosis), encoding="utf-8")
    return [json_path, md_path, *_format(diagnosis).figures(diagnosis, Path(directory))]
