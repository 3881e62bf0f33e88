"""The structural profile compares like with like (issue 37 item 6, docs/REPORT.md "Like with
like"): a factor's levels are compared only between runs that agree in every other factor the
log varies, and a factor with no such pair is called confounded and gets no rate.

Positive control: cache-2 on the default diagnosis battery. Pooled per level, its
hidden-resampling episodes succeed far more often than the others (the battery's resampling
configurations are the ones with snapshots, which show it every register), so a pooled panel
says resampling helps; the page must not show that comparison.
"""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diagym.analysis.report import write_report
from diagym.analysis.report.logs import read_run_log
from diagym.analysis.report.profile import RUN, Cell, Profile, cells, profile_of
from tests.analysis import report_inputs as inputs
from tests.analysis.html_tree import rows, tree


def logged_runs(log: Path) -> list[tuple[dict[str, Any], int, int]]:
    """(env kwargs, successes, episodes) per run, read from the log's lines directly."""
    kwargs: dict[str, dict[str, Any]] = {}
    tally: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for line in log.read_text().splitlines():
        entry = json.loads(line)
        if entry["type"] == "session":
            kwargs[entry["run_id"]] = entry["run"]["env_kwargs"]
        elif entry["type"] == "episode":
            run = entry["episode_key"].split(":")[0]
            tally[run][0] += bool(entry["record"]["success"])
            tally[run][1] += 1
    return [(kwargs[run], *tally[run]) for run in kwargs]


@pytest.fixture(scope="module")
def battery(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _, log = inputs.battery_dir(tmp_path_factory.mktemp("battery"), "cache-2")
    return log


def test_cache_2_on_the_battery_is_not_shown_that_resampling_helps(
        battery: Path, tmp_path: Path) -> None:
    pooled: dict[bool, list[int]] = {True: [0, 0], False: [0, 0]}
    for kwargs, hits, trials in logged_runs(battery):
        pooled[kwargs["hidden_resampling"]][0] += hits
        pooled[kwargs["hidden_resampling"]][1] += trials
    with_it, without = (pooled[v][0] / pooled[v][1] for v in (True, False))
    assert with_it - without > 0.5  # the control: pooled, the effect reads backwards

    page = tmp_path / "battery.html"
    write_report([battery], page)
    profile = next(n for n in tree(page).find_all("section") if n.attrs.get("id") == "profile")
    table = next(t for t in profile.find_all("table")  # the one table by factor and level
                 if {"factor", "level"} <= {th.text() for th in t.find_all("th")})
    header = [th.text() for th in table.find_all("th")]
    shown = [dict(zip(header, (td.text() for td in cells_), strict=True))
             for cells_ in rows(table)]
    resampling = [r for r in shown if r["factor"] == "hidden_resampling"]
    assert len(resampling) == 1
    assert resampling[0]["compared within"].startswith(
        "confounded: no two runs differ only in hidden_resampling")
    assert resampling[0]["rate"] == resampling[0]["hits/trials"] == "-"
    # the figure's resampling panel draws no rate either: no point of that factor exists
    found = profile_of(cells(read_run_log(battery).runs))
    assert not [p for p in found.points if p.factor == "hidden_resampling"]
    check_like_with_like(found, [Cell("workflow", "cache-2",
                                      {k: str(v) for k, v in kw.items()}, hits, trials)
                                 for kw, hits, trials in logged_runs(battery)])


def check_like_with_like(found: Profile, given_cells: list[Cell]) -> None:
    """Every drawn point pools exactly the cells at its level whose other factors take one of
    its series' settings; every setting of a series holds every level of the series; a factor
    is confounded exactly when no two cells of a policy differ in it alone."""
    keys = sorted({k for c in given_cells for k in c.kwargs})
    varying = [k for k in keys if len({c.kwargs.get(k) for c in given_cells}) > 1]

    def setting(factor: str, cell: Cell) -> str:
        return ", ".join(f"{k}={cell.kwargs.get(k, '-')}" for k in varying if k != factor)

    series: dict[tuple[str, str, str], list[Any]] = defaultdict(list)
    if not varying:  # one configuration: the rate of each run, no factor
        assert {p.factor for p in found.points} == {RUN}
        assert sum(p.trials for p in found.points) == sum(c.trials for c in given_cells)
        return
    for p in found.points:
        mine = [c for c in given_cells if c.policy == p.policy
                and c.kwargs.get(p.factor) == p.level and setting(p.factor, c) in p.strata]
        assert (p.hits, p.trials) == (sum(c.hits for c in mine), sum(c.trials for c in mine))
        series[(p.policy, p.factor, p.within)].append(p)
    for (policy, factor, _), points in series.items():
        levels = {p.level for p in points}
        assert len(levels) >= 2
        assert len({p.strata for p in points}) == 1  # the same settings at every level
        if len(points[0].strata) > 1:  # pooled sets are weighed alike at every level
            trials = {s: {lv: sum(c.trials for c in given_cells if c.policy == policy
                                  and setting(factor, c) == s and c.kwargs.get(factor) == lv)
                          for lv in levels} for s in points[0].strata}
            total = sum(n for row in trials.values() for n in row.values())
            for row in trials.values():
                for lv, n in row.items():
                    share = sum(row.values()) / total
                    assert n == pytest.approx(share * sum(r[lv] for r in trials.values()))
        for stratum in points[0].strata:
            held = {c.kwargs.get(factor) for c in given_cells
                    if c.policy == policy and setting(factor, c) == stratum}
            assert held == levels
    for policy in {c.policy for c in given_cells}:
        mine = [c for c in given_cells if c.policy == policy]
        for factor in varying:
            pair = any(a.kwargs.get(factor) != b.kwargs.get(factor)
                       and setting(factor, a) == setting(factor, b)
                       for a, b in itertools.combinations(mine, 2))
            confounded = any(c.factor == factor and c.policy == policy
                             for c in found.confounded)
            assert confounded == (not pair), (policy, factor)


GRID = [dict(zip("abc", levels, strict=True))
        for levels in itertools.product(("0", "1", "2"), repeat=3)]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(range(len(GRID))), st.sampled_from(["p", "q"]),
                          st.integers(0, 20), st.integers(1, 20)), min_size=2, max_size=14))
def test_every_drawn_comparison_is_like_with_like(runs: list[tuple[int, str, int, int]]) -> None:
    made = [Cell("workflow", policy, GRID[g], min(hits, trials), trials)
            for g, policy, hits, trials in runs]
    check_like_with_like(profile_of(made), made)


@given(st.lists(st.integers(0, 10), min_size=len(GRID), max_size=len(GRID)))
def test_a_full_factorial_profile_is_the_pooled_rate_per_level(hits: list[int]) -> None:
    made = [Cell("workflow", "p", kwargs, h, 10) for kwargs, h in zip(GRID, hits, strict=True)]
    found = profile_of(made)
    assert not found.confounded and not found.left_out
    for factor in "abc":
        points = [p for p in found.points if p.factor == factor]
        assert len({p.within for p in points}) == 1
        for p in points:
            mine = [c for c in made if c.kwargs[factor] == p.level]
            assert (p.hits, p.trials) == (sum(c.hits for c in mine), 10 * len(mine))


def test_one_run_has_no_single_dot_profile(tmp_path: Path) -> None:
    """A log of one run has one rate, which the run summary gives with its interval: the page
    draws no profile of a single dot (issue 40 item 6); two runs of it are compared."""
    from diagym.analysis.report.profile import profile

    one = inputs.reference_log(tmp_path, 12, "cache-2", inputs.HISTORY_ENV)
    assert profile(read_run_log(one).runs) is None
    page = tmp_path / "one.html"
    write_report([one], page)
    assert 'id="profile"' not in page.read_text()
    two = inputs.reference_log(tmp_path, 12, "exact", inputs.HISTORY_ENV)
    found = profile([*read_run_log(one).runs, *read_run_log(two).runs])
    assert found is not None and len(found[0].rows) == 2
