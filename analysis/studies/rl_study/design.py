"""The RL study as data: one small StatefulWorkflow preset under snapshot and history
feedback at widths 1 and 8, two SB3 algorithms and three reference controllers.

Why these arms: MaskablePPO is memoryless (it sees only the current observation) and
RecurrentPPO has an LSTM memory; history feedback at width 8 needs memory of registers shown
only initially, so seed 003's question for any agent applies: does it fail on width, on
feedback, or not at all?
"""

from __future__ import annotations

from analysis.studies.reproduce.design import FOLLOW_ON_SEEDS

ENV_ID = "StatefulWorkflow-v0"
PRESET = {"n_ops": 4, "depth": 2, "candidates": 2}
ALGOS = ("maskable-ppo", "recurrent-ppo")
FEEDBACK = {"snapshot": 1, "history": 0}
WIDTHS = (1, 8)
REFERENCES = ("exact", "cache-2", "uniform-candidate")
EVAL_SEEDS = FOLLOW_ON_SEEDS  # held out from training (seeds from 0), shared by every agent
