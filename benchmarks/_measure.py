"""The one way benchmarks time contenders side by side on a shared machine: every contender
once to warm up, then `repeats` interleaved rounds, so a load change hits them all alike;
the median of each is what gets quoted."""

from __future__ import annotations

import statistics
from collections.abc import Callable


def measure(contenders: dict[str, Callable[[], float]], repeats: int) -> dict[str, float]:
    """Median of each contender's returned figure over `repeats` interleaved rounds."""
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for run in contenders.values():
        run()  # warm-up: caches, allocator, branch predictors
    for _ in range(repeats):
        for name, run in contenders.items():
            samples[name].append(run())
    return {name: statistics.median(values) for name, values in samples.items()}
