"""Structured SB3 policies for StatefulWorkflow: operations and registers as tokens.

A flat MLP over the one-hot observation must discover a pointer lookup (operation -> the
register it queries -> that register's value mod b -> the slot carrying that code) through a
dense layer, and in 1M steps it does not. These policies give the network the task's
objects instead, and let it learn the lookup itself:

- an **operation token** per operation carries its completion bit, how many of its
  prerequisites are still pending, its update register and increment (one-hot), and the
  embedding of the register it queries; it has no identifier, so relabelling the operations
  permutes the tokens and nothing else (`tests/controllers/test_sb3_entity.py`);
- a **register token** per register carries the embedding of its index (the *same*
  embedding table as the operations' query register, so attention can match an operation to
  the register it reads), its public value one-hot (-1 when hidden), and whether it was the
  last register updated and by how much;
- a **global token** carries the failure code and error count.

A small transformer encoder mixes them; the action head scores every (operation, slot) pair
bilinearly: the operation's state is mapped to one score per code value and slot a of
operation v gets the score of its code (`PairHead`). Nothing here compares a register with a
code: no input says which slot matches, the register value enters raw (not mod b), and the
network must learn both the routing (which register an operation reads) and the residue.
The one derived input, "operation v is ready" (not completed, no pending prerequisite), is
the env's own action mask recomputed from public fields; it masks the logits so that
RecurrentPPO, which takes no action masks, plays under the same rule as MaskablePPO.

The memory variant (`EntityLstmPolicy`, for sb3-contrib's RecurrentPPO) keeps SB3's
conventions: the LSTM sits where RecurrentPPO puts it, between the features extractor and
the heads, but reads only the register fields (values, last update) and the count of
completed operations (not which: it too is blind to operation identifiers), and passes the
current tokens through beside its output (`MemoryLSTM`), so the head can let each operation
attend to per-register memory slots decoded from the LSTM state (`MemoryPairHead`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from sb3_contrib.common.maskable.policies import MaskableMultiInputActorCriticPolicy
from sb3_contrib.common.recurrent.policies import RecurrentMultiInputActorCriticPolicy
from stable_baselines3.common.policies import MultiInputActorCriticPolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn

ARCHS = ("mlp", "entity", "entity-lstm")
REGISTERS = 8  # register slots; values 0..7, -1 when hidden
CODE_LEVELS = 8  # codes (and register values) one-hot width
MASKED = -1e8  # the logit of an action the mask forbids (sb3-contrib's MaskableCategorical)


def _width(space: spaces.Space) -> int:
    return int(space.n) if isinstance(space, spaces.Discrete | spaces.MultiBinary) \
        else int(np.prod(space.shape))


class EntityExtractor(BaseFeaturesExtractor):
    """Tokens -> transformer -> one flat feature vector the heads slice (see `Layout`).

    Reads the one-hot observation of diagym.controllers.sb3.observation (after SB3's
    preprocessing: Discrete fields one-hot, everything float)."""

    def __init__(self, observation_space: spaces.Dict, d_model: int = 64, heads: int = 4,
                 layers: int = 2) -> None:
        s = observation_space.spaces
        n = _width(s["completed"])
        b = _width(s["codes"]) // (n * CODE_LEVELS)
        value_levels = _width(s["registers"]) // REGISTERS
        self.n, self.b, self.d = n, b, d_model
        self.memory_width = _width(s["registers"]) + _width(s["last_update"]) + 1
        # features: op states | codes one-hot | ready | global state | memory input
        super().__init__(observation_space, n * d_model + n * b * CODE_LEVELS + n + d_model
                         + self.memory_width)
        self.register_index = nn.Linear(REGISTERS, d_model, bias=False)  # shared by both kinds
        self.op_in = nn.Linear(2 + 2 * CODE_LEVELS, d_model)
        self.register_in = nn.Linear(2 * value_levels + 1, d_model)
        self.global_in = nn.Linear(_width(s["failure"]) + _width(s["errors"]) + 1, d_model)
        self.kind = nn.Parameter(torch.randn(3, d_model) * 0.1)  # op, register, global
        layer = nn.TransformerEncoderLayer(d_model, heads, dim_feedforward=2 * d_model,
                                           dropout=0.0, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        self.value_levels = value_levels

    def forward(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        """Features of every row; all-zero rows (RecurrentPPO pads its sequences with them,
        often to several times the real batch) get zeros without passing the encoder."""
        real = obs["registers"].sum(-1) > 0  # a real row has one hot level per register
        if bool(real.all()):
            return self._features(obs)
        out = torch.zeros(real.shape[0], self.features_dim, device=real.device)
        if bool(real.any()):
            out[real] = self._features({k: v[real] for k, v in obs.items()})
        return out

    def _features(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        n, levels = self.n, self.value_levels
        batch = obs["completed"].shape[0]
        completed = obs["completed"]
        prereq = obs["prereq"].reshape(batch, n, n)
        pending = (prereq * (1.0 - completed)[:, None, :]).sum(-1)
        ready = (1.0 - completed) * (pending < 0.5).float()
        query = obs["query_register"].reshape(batch, n, REGISTERS)
        op_fields = torch.cat([completed[..., None], pending[..., None] / n,
                               obs["update_register"].reshape(batch, n, CODE_LEVELS),
                               obs["delta"].reshape(batch, n, CODE_LEVELS)], -1)
        ops = self.op_in(op_fields) + self.register_index(query) + self.kind[0]
        values = obs["registers"].reshape(batch, REGISTERS, levels)
        last = obs["last_update"].reshape(batch, 2, levels)
        # last register updated: its one-hot without the "-1 = none" level
        is_last = last[:, 0, 1:1 + REGISTERS][..., None]
        increment = is_last * last[:, 1][:, None, :]
        register_fields = torch.cat([values, increment, is_last], -1)
        eye = torch.eye(REGISTERS, device=completed.device)
        registers = self.register_in(register_fields) + self.register_index(eye) + self.kind[1]
        glob = self.global_in(torch.cat([obs["failure"].reshape(batch, -1),
                                         obs["errors"].reshape(batch, -1),
                                         completed.mean(-1, keepdim=True)], -1)) + self.kind[2]
        tokens = torch.cat([ops, registers, glob[:, None]], 1)
        states = self.norm(self.encoder(tokens))
        memory = torch.cat([obs["registers"], obs["last_update"],
                            completed.mean(-1, keepdim=True)], -1)
        return torch.cat([states[:, :n].reshape(batch, -1), obs["codes"], ready,
                          states[:, -1], memory], -1)

    def split(self, features: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """(op states (B, N, d), codes (B, N, b, C), ready (B, N), global (B, d), memory)."""
        n, b, d = self.n, self.b, self.d
        sizes = [n * d, n * b * CODE_LEVELS, n, d, self.memory_width]
        ops, codes, ready, glob, memory = torch.split(features, sizes, -1)
        return (ops.reshape(-1, n, d), codes.reshape(-1, n, b, CODE_LEVELS), ready, glob,
                memory)


class PairHead(nn.Module):
    """Logits per (operation, slot): each operation state scores the code values, slot a gets
    the score of its code; unready operations masked. The critic reads the global token and
    the mean operation state."""

    def __init__(self, extractor: EntityExtractor, memory_dim: int = 0) -> None:
        super().__init__()
        d = extractor.d
        self.extractor_split = extractor.split
        self.memory_dim = memory_dim
        self.latent_dim_pi = extractor.n * extractor.b
        self.latent_dim_vf = d
        self.code_scores = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, CODE_LEVELS))
        self.value = nn.Sequential(nn.Linear(2 * d + memory_dim, d), nn.ReLU())

    def _parts(self, latent: torch.Tensor) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        return latent[..., :self.memory_dim], self.extractor_split(latent[..., self.memory_dim:])

    def op_states(self, memory: torch.Tensor, ops: torch.Tensor) -> torch.Tensor:
        return ops

    def forward_actor(self, latent: torch.Tensor) -> torch.Tensor:
        memory, (ops, codes, ready, _, _) = self._parts(latent)
        scores = self.code_scores(self.op_states(memory, ops))  # (B, N, C)
        logits = torch.einsum("bnc,bnac->bna", scores, codes)
        logits = logits.masked_fill(ready[..., None] < 0.5, MASKED)
        return logits.flatten(1)

    def forward_critic(self, latent: torch.Tensor) -> torch.Tensor:
        memory, (ops, _, _, glob, _) = self._parts(latent)
        return self.value(torch.cat([glob, ops.mean(1), memory], -1))

    def forward(self, latent: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.forward_actor(latent), self.forward_critic(latent)


class MemoryPairHead(PairHead):
    """PairHead whose operation states first attend to per-register memory slots decoded
    from the LSTM output, keyed by the shared register-index embedding."""

    def __init__(self, extractor: EntityExtractor, memory_dim: int, heads: int = 4) -> None:
        super().__init__(extractor, memory_dim)
        d = extractor.d
        self.slots = nn.Linear(memory_dim, REGISTERS * d)
        self.index = extractor.register_index
        self.attend = nn.MultiheadAttention(d, heads, batch_first=True)
        self.norm = nn.LayerNorm(d)

    def op_states(self, memory: torch.Tensor, ops: torch.Tensor) -> torch.Tensor:
        eye = torch.eye(REGISTERS, device=ops.device)
        slots = self.slots(memory).reshape(-1, REGISTERS, ops.shape[-1]) + self.index(eye)
        read, _ = self.attend(ops, slots, slots, need_weights=False)
        return self.norm(ops + read)


class MemoryLSTM(nn.Module):
    """Stands where RecurrentPPO puts its nn.LSTM (same call signature and the attributes
    sb3-contrib reads: input_size, hidden_size, num_layers), runs the LSTM over the memory
    slice of the features only, and returns [LSTM output | features] so the head still sees
    the current tokens."""

    def __init__(self, features_dim: int, memory: slice, hidden_size: int,
                 num_layers: int = 1) -> None:
        super().__init__()
        self.input_size, self.hidden_size, self.num_layers = features_dim, hidden_size, num_layers
        self.memory = memory
        self.lstm = nn.LSTM(memory.stop - memory.start, hidden_size, num_layers=num_layers)

    def forward(self, features: torch.Tensor,
                states: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, Any]:
        out, states = self.lstm(features[..., self.memory], states)
        return torch.cat([out, features], -1), states


def _identity_action_net(policy: Any, lr_schedule: Any) -> None:
    """The head already outputs the joint logits: the action net is the identity."""
    policy.action_net = nn.Identity()
    policy.optimizer = policy.optimizer_class(policy.parameters(), lr=lr_schedule(1),
                                              **policy.optimizer_kwargs)


def _entity_defaults(kwargs: dict[str, Any]) -> dict[str, Any]:
    kwargs.setdefault("features_extractor_class", EntityExtractor)
    kwargs.setdefault("ortho_init", False)  # PyTorch's init suits the attention layers
    return kwargs


class _PairHeadPolicy:
    """What the memoryless policies add to an SB3 actor-critic policy class: EntityExtractor,
    PairHead, and the identity action net."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **_entity_defaults(kwargs))

    def _build_mlp_extractor(self) -> None:
        self.mlp_extractor = PairHead(self.features_extractor)

    def _build(self, lr_schedule: Any) -> None:
        super()._build(lr_schedule)
        _identity_action_net(self, lr_schedule)


class EntityMaskablePolicy(_PairHeadPolicy, MaskableMultiInputActorCriticPolicy):
    """MaskablePPO's policy over EntityExtractor and PairHead."""


class EntityPolicy(_PairHeadPolicy, MultiInputActorCriticPolicy):
    """PPO's policy over EntityExtractor and PairHead (it masks unready operations itself)."""


class EntityLstmPolicy(RecurrentMultiInputActorCriticPolicy):
    """RecurrentPPO's policy: EntityExtractor, MemoryLSTM for actor and critic, MemoryPairHead."""

    def __init__(self, *args: Any, lstm_hidden_size: int = 128, **kwargs: Any) -> None:
        self._lstm_hidden = lstm_hidden_size
        kwargs.setdefault("shared_lstm", False)
        kwargs.setdefault("enable_critic_lstm", True)
        super().__init__(*args, lstm_hidden_size=lstm_hidden_size, **_entity_defaults(kwargs))
        extractor = self.features_extractor
        memory = slice(extractor.features_dim - extractor.memory_width, extractor.features_dim)
        self.lstm_actor = MemoryLSTM(extractor.features_dim, memory, lstm_hidden_size)
        self.lstm_critic = MemoryLSTM(extractor.features_dim, memory, lstm_hidden_size)
        self.optimizer = self.optimizer_class(self.parameters(), lr=self._lr(1),
                                              **self.optimizer_kwargs)

    def _build_mlp_extractor(self) -> None:
        self.mlp_extractor = MemoryPairHead(self.features_extractor, self._lstm_hidden)

    def _build(self, lr_schedule: Any) -> None:
        self._lr = lr_schedule
        super()._build(lr_schedule)
        _identity_action_net(self, lr_schedule)


def policy_for(arch: str, algo: str) -> Any:
    """The SB3 policy (a class, or the name SB3 resolves) of an architecture under an algo;
    ValueError naming the allowed combinations."""
    if arch == "mlp":
        return "MultiInputLstmPolicy" if algo == "recurrent-ppo" else "MultiInputPolicy"
    table = {("entity", "maskable-ppo"): EntityMaskablePolicy, ("entity", "ppo"): EntityPolicy,
             ("entity-lstm", "recurrent-ppo"): EntityLstmPolicy}
    if (arch, algo) not in table:
        allowed = ", ".join(f"--arch {a} with --algo {g}" for a, g in table)
        raise ValueError(f"arch: {arch!r} cannot train with algo {algo!r}; allowed: mlp with "
                         f"any algo, {allowed}")
    return table[arch, algo]
