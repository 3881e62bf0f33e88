"""The RL study as data: StatefulWorkflow under snapshot and history feedback at several
widths, SB3 agents of each architecture and three reference controllers.

Why these arms: MaskablePPO is memoryless (it sees only the current observation) and
RecurrentPPO has an LSTM memory; history feedback at width 8 needs memory of registers shown
only initially, so seed 003's question for any agent applies: does it fail on width, on
feedback, or not at all? The architectures (controllers/sb3/entity.py, docs/RL.md) ask it
of the network too: a flat MLP over one-hot fields, operation and register tokens with
attention (entity), and the same with an LSTM memory (entity-lstm).

The default grid is the small preset with the MLP agents, a few minutes of CPU; `diagym
rl-study --arch mlp,entity,entity-lstm --full` plays the default N (FULL_PRESET) at every
width in FULL_WIDTHS and candidate count in FULL_CANDIDATES.
"""

from __future__ import annotations

from diagym.analysis.studies.seeds import FOLLOW_ON_SEEDS

ENV_ID = "StatefulWorkflow-v0"
PRESET = {"n_ops": 4, "depth": 2, "candidates": 2}
FULL_PRESET = {"n_ops": 8, "depth": 4}  # StatefulWorkflow-v0's own N and depth
ALGOS = ("maskable-ppo", "recurrent-ppo")
# architecture -> the algorithms it trains with in the study (diagym.controllers.sb3.entity)
ARCH_ALGOS = {"mlp": ALGOS, "entity": ("maskable-ppo",), "entity-lstm": ("recurrent-ppo",)}
FEEDBACK = {"snapshot": 1, "history": 0}
WIDTHS = (1, 8)
FULL_WIDTHS = (1, 4, 8)
FULL_CANDIDATES = (2, 4)
REFERENCES = ("exact", "cache-2", "uniform-candidate")
EVAL_SEEDS = FOLLOW_ON_SEEDS  # held out from training (seeds from 0), shared by every agent
DIAGNOSIS_SEED = 2_000_000_000  # the battery's task seeds: apart from training and EVAL_SEEDS


def agent_name(algo: str, arch: str) -> str:
    """The table's name of an agent: the algorithm for the MLP, else architecture (algo)."""
    return algo if arch == "mlp" else f"{arch} ({algo})"
