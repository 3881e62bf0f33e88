"""Phase-4 figures per condition: accuracy by judge (primary) and by keywords, Cohen's kappa
between them with a bootstrap interval, unparseable verdicts, contamination, context tokens,
and steering coverage (rubrics that received an answer, over all rubrics of all trials)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from diagym.llm_policies.live_agents.protocol import Decision, cohen_kappa, kappa_interval


def summarize(decisions: Sequence[Decision], condition: str, trials: int,
              n_rubrics: int) -> dict[str, Any]:
    rows = [d for d in decisions if d.condition == condition]
    scored = [d for d in rows if d.topic is not None]
    judged = [d for d in scored if d.judge is not None]
    judge = np.array([d.judge for d in judged], dtype=bool)
    keyword_judged = np.array([d.keyword for d in judged], dtype=bool)
    keyword = np.array([d.keyword for d in scored], dtype=bool)
    low, high = kappa_interval(judge, keyword_judged)

    def mean(values: Any) -> float:
        return float(np.mean(values)) if len(values) else float("nan")

    return {
        "condition": condition, "trials": trials, "requests": len(rows),
        "decisions": len(scored), "extra_requests": len(rows) - len(scored),
        "unparseable": len(scored) - len(judged),
        "judge_accuracy": mean(judge), "keyword_accuracy": mean(keyword),
        "kappa": cohen_kappa(judge, keyword_judged), "kappa_low": low, "kappa_high": high,
        "contamination": mean([d.contaminated for d in rows]),
        "context_tokens": mean([d.context_tokens for d in rows]),
        "coverage": len(scored) / (trials * n_rubrics) if trials and n_rubrics else float("nan"),
    }
