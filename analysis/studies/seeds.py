"""The task-seed blocks the studies share.

Seed 003's primary factorial plays seeds 0..255 and its follow-on grids 10000..10255; the
RL study evaluates its trained agents on the follow-on block, held out from training (which
draws seeds from 0). One module below every study holds them, so a study never imports
another study for a seed range.
"""

from __future__ import annotations

import numpy as np

PRIMARY_SEEDS = np.arange(0, 256, dtype=np.int64)
FOLLOW_ON_SEEDS = np.arange(10_000, 10_256, dtype=np.int64)
