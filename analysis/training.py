"""`diagym train`: one command from an env id to a trained SB3 agent and its learning curve.

The curve is measured the way every other policy is: the model is wrapped as an SB3Policy and
played by the shared runner on held-out evaluation seeds (never training seeds), so its
success rate at each checkpoint is comparable with the controllers' and LLMs'. Everything a
rerun needs goes to DIR: model.zip, config.json (the exact settings and versions),
curve.csv (steps, success, return, wall seconds; appended as training goes) and curve.png.

Long runs are written incrementally. An evaluation checkpoint falls at the first rollout
boundary at or after each multiple of the evaluation interval (the weights then hold every
counted step); it first saves model.zip (to a temporary name, then `os.replace`, so a kill
never leaves a torn zip) and then appends its curve row at `model.num_timesteps`. A run into
a DIR that already holds one is refused unless `resume=True` (`--resume`): the stored
config.json must then match the request on every field but `steps`, the curve keeps its
rows (plus the row a kill between save and append lost), and training continues up to the
new `steps` with the same step counter, checkpoint cadence and cumulative wall clock. A
resumed run continues the same model and optimizer state, but its environments are rebuilt
and their seeds restart (and the rollout in progress at the kill is redone), so it is not
bit-identical to an uninterrupted run of the same length.
"""

from __future__ import annotations

import csv
import dataclasses
import inspect
import json
import logging
import platform
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from diagym import envs
from diagym.analysis.summary import summarise
from diagym.controllers.files import write_atomically
from diagym.controllers.rollout import rollout
from diagym.controllers.runlog import ResumeNeeded
from diagym.controllers.sb3.policy import (
    CONFIG_NAME,
    MODEL_NAME,
    SB3Policy,
    algo_class,
    make_vec_env,
    read_config,
    verify_model,
    write_model_hash,
)
from diagym.controllers.sb3.trust import check_archive

EVAL_SEED = 1_000_000_000  # held-out: training seeds are seed .. seed + n_envs - 1 and chains
CURVE_NAME = "curve.csv"
LOGGER = logging.getLogger("diagym.training")
CURVE_FIELDS = ("steps", "success", "return", "wall_s")
RESERVED_HYPERPARAMETERS = ("policy", "env", "seed", "device", "verbose")  # train() sets these


@dataclass
class TrainConfig:
    algo: str
    env: str
    env_kwargs: dict[str, Any]
    steps: int
    arch: str = "mlp"  # diagym.controllers.sb3.entity.ARCHS; configs written before it are mlp runs
    n_envs: int = 8
    seed: int = 0
    joint_actions: bool = True
    one_hot: bool = True
    eval_episodes: int = 64
    eval_every: int = 0  # 0: about 20 checkpoints
    torch_threads: int = 1
    hyperparameters: dict[str, Any] = field(default_factory=dict)


def default_hyperparameters(algo: str, arch: str = "mlp") -> dict[str, Any]:
    """Short rollouts and small batches: workflow episodes last at most N (+ R) steps. The
    structured recurrent policy keeps MaskablePPO's batch of 256: its backward pass through
    the attention layers is most of its cost, and 128 doubles the passes per rollout."""
    params: dict[str, Any] = {"n_steps": 128, "batch_size": 256, "learning_rate": 3e-4,
                              "gamma": 0.99, "ent_coef": 0.01, "n_epochs": 10}
    if algo == "recurrent-ppo" and arch == "mlp":
        params.update(n_steps=128, batch_size=128)
    return params


def allowed_hyperparameters(algo: str) -> list[str]:
    """Keyword arguments of the algorithm's __init__ that `hyperparameters` may set (sorted):
    not the ones train() sets itself, nor private ones such as `_init_setup_model`."""
    parameters = inspect.signature(algo_class(algo).__init__).parameters
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return sorted(name for name, p in parameters.items()
                  if p.kind in kinds and name != "self" and not name.startswith("_")
                  and name not in RESERVED_HYPERPARAMETERS)


def validate_hyperparameters(algo: str, hyperparameters: dict[str, Any]) -> None:
    """ValueError naming the first (sorted) key the algorithm's __init__ does not take."""
    allowed = allowed_hyperparameters(algo)
    for key in sorted(hyperparameters, key=str):
        if key in allowed:
            continue
        what = "reserved key" if key in RESERVED_HYPERPARAMETERS else "unknown key"
        note = " (train sets it)" if key in RESERVED_HYPERPARAMETERS else ""
        raise ValueError(f"hyperparameters: {what} {key!r}{note} for {algo}; "
                         f"allowed: {', '.join(allowed)}")
    parameters = inspect.signature(algo_class(algo).__init__).parameters
    for key in sorted(hyperparameters, key=str):
        _check_number(algo, key, parameters[key].default, hyperparameters[key])


def _check_number(algo: str, key: str, default: Any, value: Any) -> None:
    """A number where the algorithm's default is one: SB3 would otherwise fail deep inside
    learn() (None * float) or slice with a float, long after the run started."""
    if isinstance(default, bool) or not isinstance(default, int | float):
        return
    is_int = isinstance(value, int) and not isinstance(value, bool)
    if isinstance(default, int) and not is_int:
        raise ValueError(f"hyperparameters: {key!r} for {algo} must be an integer (default "
                         f"{default}); got {json.dumps(value)}")
    if not is_int and not (isinstance(value, float) and value == value):
        raise ValueError(f"hyperparameters: {key!r} for {algo} must be a number (default "
                         f"{default:g}); got {json.dumps(value)}")


def check_trainable(config: TrainConfig) -> None:
    """ValueError when `config.algo` cannot train on `config.env`: MaskablePPO needs the
    env's info["action_mask"] at every step, and an env without it fails at the first
    held-out evaluation with a tensor reshape error; a structured architecture reads the
    workflow's one-hot fields and scores joint actions."""
    import gymnasium as gym

    from diagym.controllers.sb3.entity import ARCHS, policy_for

    if config.arch not in ARCHS:
        raise ValueError(f"arch must be one of {' | '.join(ARCHS)}; got {config.arch!r}")
    policy_for(config.arch, config.algo)
    if config.arch != "mlp" and (envs.family_of(config.env) != envs.WORKFLOW
                                 or not config.one_hot or not config.joint_actions):
        raise ValueError(f"--arch {config.arch} needs a StatefulWorkflow env with one-hot "
                         "observations and joint actions (no --raw-obs, no --multi-discrete); "
                         f"got {config.env}")
    if config.algo != "maskable-ppo":
        return
    env = gym.make(config.env, **config.env_kwargs)
    try:
        _, info = env.reset(seed=config.seed)
    finally:
        env.close()
    if "action_mask" not in info:
        raise ValueError(f"--algo maskable-ppo needs an env that reports info['action_mask']; "
                         f"{config.env} does not: use --algo ppo or recurrent-ppo")


def evaluate(policy: SB3Policy, config: TrainConfig) -> tuple[float, float]:
    """(success, mean return) over the held-out evaluation seeds, through `rollout`.

    Success is the success rate, or for envs that report steering metrics (DACSSteering) the
    steering accuracy over all decisions, the metric seed 002 reports for an orchestrator."""
    import gymnasium as gym

    env = gym.make(config.env, **config.env_kwargs)
    summary = summarise(rollout(env, policy, config.eval_episodes, seed=EVAL_SEED))
    success = summary.steering.accuracy if summary.steering is not None else summary.success
    return success, summary.mean_return


def _stored_mismatches(stored: dict[str, Any], config: TrainConfig) -> list[str]:
    """'field (stored X, requested Y)' for every TrainConfig field but `steps` that differs."""
    requested = json.loads(json.dumps(asdict(config)))  # JSON-normalised like the stored one
    differences = []
    for item in dataclasses.fields(TrainConfig):
        if item.name == "steps":
            continue
        default = None if item.default is dataclasses.MISSING else item.default
        if item.default_factory is not dataclasses.MISSING:
            default = item.default_factory()
        old = stored.get(item.name, default)
        if old != requested[item.name]:
            differences.append(f"{item.name} (stored {json.dumps(old)}, "
                               f"requested {json.dumps(requested[item.name])})")
    return differences


def _silent_logger() -> Any:
    """SB3's logger with no output: its default (verbose 0, no tensorboard) still makes an
    empty SB3-<date> directory in the system's temp folder at every learn(); train records
    what it needs in curve.csv itself."""
    from stable_baselines3.common.logger import Logger

    return Logger(folder=None, output_formats=[])


def train(config: TrainConfig, out: Path, progress: bool = False, resume: bool = False,
          trust_model: bool = False) -> Path:
    """Train, checkpointing model and learning curve; returns the model path.

    resume: continue the run in `out` (same settings but `steps`) up to `config.steps`;
    without a model in `out` it starts afresh. Without it, a used `out` is refused.
    trust_model: resume a model.zip whose hash `diagym train` did not write (it is a pickle,
    and loading it runs any code it holds); without it such a model is refused unloaded."""
    validate_hyperparameters(config.algo, config.hyperparameters)
    check_trainable(config)
    out = Path(out)
    model_path, curve_path = out / MODEL_NAME, out / CURVE_NAME
    config.hyperparameters = {**default_hyperparameters(config.algo, config.arch),
                              **config.hyperparameters}
    resuming = resume and model_path.exists()
    stored = _resumable_settings(config, out) if resuming else {}
    if not resume and (model_path.exists() or curve_path.exists()):
        raise ResumeNeeded(f"out {out} holds a training run", "--out")

    import torch

    torch.set_num_threads(config.torch_threads)
    vec = make_vec_env(config.env, config.env_kwargs, config.n_envs, config.joint_actions,
                       config.seed, one_hot=config.one_hot)
    if resuming:
        model, rows, every = _resumed_model(config, out, vec, stored, trust_model)
    else:
        model, rows, every = _fresh_model(config, vec)
    model.set_logger(_silent_logger())
    out.mkdir(parents=True, exist_ok=True)
    _write_settings(config, out / CONFIG_NAME, every)
    if resuming:  # the rewritten config with the model it continues: still this run
        write_model_hash(out)
    if not rows:
        with curve_path.open("w", newline="") as handle:
            csv.writer(handle).writerow(CURVE_FIELDS)
    checkpoint = _Checkpointer(model, config, out, rows)
    if checkpoint.last_steps < model.num_timesteps:  # a fresh run's step 0, or a lost row
        checkpoint(save=not resuming)
    bar = _progress_bar(model, config, vec.num_envs, out if resuming else None) \
        if progress else None
    try:
        if model.num_timesteps < config.steps:
            model.learn(total_timesteps=config.steps - int(model.num_timesteps),
                        callback=_checkpoints(checkpoint, every, bar),
                        reset_num_timesteps=not resuming)
    finally:
        if bar is not None:
            bar.close()
    if checkpoint.last_steps < model.num_timesteps:
        checkpoint()
    plot_curve(curve_path, out / "curve.png", f"{config.algo} ({config.arch}) on {config.env}")
    return model_path


def _resumable_settings(config: TrainConfig, out: Path) -> dict[str, Any]:
    """The stored settings of the run in `out`, refused unless they match `config` on every
    field but `steps`."""
    config_path = out / CONFIG_NAME
    if not config_path.exists():
        raise ValueError(f"out: {out} holds {MODEL_NAME} but no {CONFIG_NAME}; "
                         "cannot resume it")
    stored = read_config(out)  # bounded: a FIFO or a device there is refused, not read
    differences = _stored_mismatches(stored, config)
    if differences:
        raise ValueError(f"out: {out} was trained with other settings; --resume changes "
                         f"only --steps: {'; '.join(differences)}")
    return stored


def _resumed_model(config: TrainConfig, out: Path, vec: Any, stored: dict[str, Any],
                   trust_model: bool) -> tuple[Any, list[dict[str, float]], int]:
    """The stored model, its curve rows (a torn last row cut) and checkpoint interval."""
    model_path, curve_path = out / MODEL_NAME, out / CURVE_NAME
    if not trust_model:
        verify_model(out)
    check_archive(model_path)
    model = algo_class(config.algo).load(model_path, env=vec, device="cpu")
    if curve_path.exists():
        _cut_torn_row(curve_path)
    rows = read_curve(curve_path) if curve_path.exists() else []
    if rows and rows[-1]["steps"] > model.num_timesteps:
        raise ValueError(f"out: {curve_path} ends at {int(rows[-1]['steps'])} steps but "
                         f"{model_path} holds {model.num_timesteps}; cannot resume it")
    every = int(stored.get("eval_every_steps") or config.eval_every
                or max(int(stored["steps"]) // 20,
                       config.n_envs * config.hyperparameters["n_steps"]))
    return model, rows, every


def _fresh_model(config: TrainConfig, vec: Any) -> tuple[Any, list[dict[str, float]], int]:
    """A new model on `vec`, no curve rows yet, and its checkpoint interval."""
    from diagym.controllers.sb3.entity import policy_for

    hyper = config.hyperparameters
    try:
        model = algo_class(config.algo)(policy_for(config.arch, config.algo), vec,
                                        seed=config.seed, device="cpu", verbose=0, **hyper)
    except (AssertionError, TypeError, ValueError) as error:  # SB3 checks by assert
        raise ValueError(f"hyperparameters: {config.algo} refused them: "
                         f"{error}") from None
    every = config.eval_every or max(config.steps // 20, config.n_envs * hyper["n_steps"])
    return model, [], every


def _write_settings(config: TrainConfig, path: Path, every: int) -> None:
    """config.json: the run's settings, library versions and checkpoint interval."""
    import sb3_contrib
    import stable_baselines3
    import torch

    settings = json.dumps({
        **asdict(config), "python": platform.python_version(),
        "stable_baselines3": stable_baselines3.__version__,
        "sb3_contrib": sb3_contrib.__version__, "torch": torch.__version__,
        "eval_every_steps": every,
    }, indent=2)
    write_atomically(path, lambda handle: handle.write(settings.encode()))


class _Checkpointer:
    """Saves the model, then evaluates it and appends its curve row (a kill in between loses
    only the row, which a resume re-evaluates); the wall clock continues the curve's."""

    def __init__(self, model: Any, config: TrainConfig, out: Path,
                 rows: list[dict[str, float]]) -> None:
        self.model, self.config, self.out = model, config, out
        self.last_steps = int(rows[-1]["steps"]) if rows else -1
        self.start = time.perf_counter() - (rows[-1]["wall_s"] if rows else 0.0)
        self.raw_space = None
        if config.one_hot and envs.family_of(config.env) == envs.WORKFLOW:
            import gymnasium as gym

            self.raw_space = gym.make(config.env, **config.env_kwargs).observation_space

    def __call__(self, save: bool = True) -> None:
        config, model = self.config, self.model
        steps = int(model.num_timesteps)
        if save:
            write_atomically(self.out / MODEL_NAME, model.save)
            write_model_hash(self.out)
        success, ret = evaluate(SB3Policy(model, config.algo, config.env,
                                          config.joint_actions, raw_space=self.raw_space),
                                config)
        with (self.out / CURVE_NAME).open("a", newline="") as handle:
            csv.writer(handle).writerow([steps, f"{success:.4f}", f"{ret:.4f}",
                                         f"{time.perf_counter() - self.start:.2f}"])
        self.last_steps = steps


def _progress_bar(model: Any, config: TrainConfig, n_envs: int, resumed_from: Path | None
                  ) -> Any:
    """The bar of the steps trained, from the model's steps (a resumed run's checkpoint, said
    in the resuming line when `resumed_from`) to the total SB3 will reach: it collects whole
    rollouts (n_steps per env), so it stops at the first multiple past --steps."""
    from diagym.analysis.progress import progress as progress_bar

    done = int(model.num_timesteps)
    rollout = int(getattr(model, "n_steps", 1)) * n_envs
    total = max(done, done + -(-(config.steps - done) // rollout) * rollout)
    return progress_bar(total=total, initial=done, unit="step", desc=f"{config.algo}",
                        resumed_from=resumed_from, todo="to train")


def _checkpoints(checkpoint: _Checkpointer, every: int, bar: Any) -> Any:
    """The SB3 callback that checkpoints at rollout starts, where the weights have trained on
    every counted step: the first one at or after each multiple of `every`; it advances `bar`
    (None: no progress) by every step."""
    from stable_baselines3.common.callbacks import BaseCallback

    class Checkpoints(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.next = (int(checkpoint.model.num_timesteps) // every + 1) * every

        def _on_rollout_start(self) -> None:
            steps = int(self.model.num_timesteps)
            if steps >= self.next:
                checkpoint()
                self.next = (steps // every + 1) * every

        def _on_step(self) -> bool:
            if bar is not None:
                bar.update(self.training_env.num_envs)
            return True

    return Checkpoints()


def read_curve(path: Path, report: bool = True) -> list[dict[str, float]]:
    """The curve's rows. A row that is not a number in every field (torn by a kill mid-write,
    or a stray line) is skipped and, with `report`, named in one warning line, as the run log
    does, so it never blocks a resume."""
    rows, skipped = [], 0
    with Path(path).open(newline="", encoding="utf-8", errors="replace") as handle:
        for row in csv.DictReader(handle):
            try:
                if None in row:
                    raise ValueError("more fields than the header")
                rows.append({k: float(row[k]) for k in CURVE_FIELDS})
            except (KeyError, TypeError, ValueError):
                skipped += 1
    if skipped and report:
        LOGGER.warning("diagym: warning: curve %s: skipped %d row%s that %s not whole; the "
                       "run resumes from the others", path, skipped, "s" * (skipped != 1),
                       "are" if skipped != 1 else "is")
    return rows


def _cut_torn_row(path: Path) -> None:
    """Cut a last row without its newline (a kill mid-append), so the next row starts on a
    line of its own instead of being glued to the torn one."""
    data = path.read_bytes()
    cut = data.rfind(b"\n") + 1
    if cut < len(data):
        with path.open("r+b") as handle:
            handle.truncate(cut)
        LOGGER.warning("diagym: warning: curve %s: cut 1 torn last row; the run resumes from "
                       "the others", path)


def plot_curve(curve_csv: Path, out_png: Path, title: str) -> Path:
    """The curve beside its run's config (CONFIG_NAME): the agent's palette colour, and a
    caption naming the evaluation seeds; a Wilson band where a point is a rate over episodes
    (a DACS point is an accuracy over decisions)."""
    from diagym.analysis.plotting import curve_figure, save

    rows = read_curve(curve_csv, report=False)  # train reported them when it read the curve
    config = json.loads((Path(curve_csv).parent / CONFIG_NAME).read_text())
    episodes = int(config.get("eval_episodes", TrainConfig.eval_episodes))
    seeds = range(EVAL_SEED, EVAL_SEED + episodes)
    trials = episodes if envs.family_of(config["env"]) == envs.WORKFLOW else None
    return save(curve_figure(rows, config["algo"], title, seeds, trials), out_png)
