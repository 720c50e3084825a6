"""Shared pieces of the learner tests: one tiny config, its compiled functions, tree comparisons.

Every learner test module trains :data:`TINY` (or a config that differs only in traced values), and the
CLI tests pass the same values as flags, so one compilation of ``init`` and ``update_chunk`` (kept in
the persistent compilation cache that ``conftest.py`` turns on) serves all of them.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from slamorl_jax.agent.config import TrainConfig
from slamorl_jax.agent.trainer import Trainer, TrainState, env_params_from_config, make_train
from slamorl_jax.env.catalog import load_catalog
from slamorl_jax.env.observation import NUM_FEATURES
from slamorl_jax.env.params import EnvParams

REPO_ROOT = Path(__file__).resolve().parent.parent

# A constant learning rate keeps ``total_timesteps`` out of the compiled update, so runs of any
# length share one compilation.
TINY = TrainConfig(
    num_envs=32,
    rollout_length=8,
    update_epochs=2,
    num_minibatches=4,
    hidden_sizes=(16, 16),
    updates_per_chunk=2,
    learning_rate=1e-3,
    lr_schedule="constant",
    scenario="deadline-critical",
    init_strategy="random",
    total_timesteps=4 * 32 * 8 * 2,  # four chunks
    seed=0,
)


def cli_flags(config: TrainConfig) -> list[str]:
    """``config`` as ``python -m slamorl_jax.train`` flags (every field explicit)."""
    out = []
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if value is None:
            continue
        if isinstance(value, bool):
            out.append(f"--{field.name}" if value else f"--no{field.name}")
        elif isinstance(value, tuple):
            out.append(f"--{field.name}={','.join(str(v) for v in value)}")
        else:
            out.append(f"--{field.name}={value}")
    return out


def train_tiny(args: list[str]) -> None:
    """``python -m slamorl_jax.train`` in this process on TINY's flags, no final evaluation, and
    ``args`` (later flags win); asserts it ends with status 0."""
    from slamorl_jax import train

    try:
        train.main(train.parse_flags(["slamorl_jax.train", *cli_flags(TINY), "--eval_episodes=0", *args]))
    except SystemExit as exit_:
        assert exit_.code == 0
    finally:
        train.FLAGS.unparse_flags()


@functools.lru_cache(maxsize=8)
def env_params_for(config: TrainConfig) -> EnvParams:
    """``env_params_from_config`` computed once per config (it builds lookup tables)."""
    return env_params_from_config(config)


def with_fixed_workload(params: EnvParams, name: str) -> EnvParams:
    """``params`` whose job generator always draws the named workload."""
    probs = np.zeros(params.workload_probs.shape, np.float32)
    probs[load_catalog().workload_names.index(name)] = 1.0
    return params.replace(workload_probs=jnp.asarray(probs))


@dataclasses.dataclass(frozen=True)
class Compiled:
    """A trainer with ``init`` and ``update_chunk`` jitted exactly as the CLI does (state donated)."""

    trainer: Trainer
    env_params: EnvParams
    init: Callable[[jax.Array, EnvParams], TrainState]
    chunk: Callable[[TrainState, EnvParams], tuple[TrainState, dict]]

    def fresh(self, seed: int | None = None) -> TrainState:
        """A new training state from ``seed`` (default: the config's)."""
        seed = self.trainer.config.seed if seed is None else seed
        return self.init(jax.random.key(seed), self.env_params)

    def run(
        self, state: TrainState, chunks: int, env_params: EnvParams | None = None
    ) -> tuple[TrainState, list[dict[str, Any]]]:
        """``chunks`` chunks from ``state`` (which is donated); returns the state and each chunk's metrics."""
        env_params = self.env_params if env_params is None else env_params
        history = []
        for _ in range(chunks):
            state, metrics = self.chunk(state, env_params)
            history.append(jax.device_get(metrics))
        return state, history


def compile_trainer(config: TrainConfig) -> Compiled:
    """A fresh :class:`Compiled` (new ``make_train``, new jit wrappers) for ``config``."""
    trainer = make_train(config)
    return Compiled(
        trainer=trainer,
        env_params=env_params_for(config),
        init=jax.jit(trainer.init),
        chunk=jax.jit(trainer.update_chunk, donate_argnums=0),
    )


@functools.lru_cache(maxsize=4)
def shared_trainer(config: TrainConfig) -> Compiled:
    """One :class:`Compiled` per config for the whole test session."""
    return compile_trainer(config)


def to_host(tree: Any) -> Any:
    """NumPy copies of every leaf, PRNG keys as their raw key data."""

    def leaf(x: Any) -> np.ndarray:
        if isinstance(x, jax.Array) and jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
            x = jax.random.key_data(x)
        return np.array(x)

    return jax.tree.map(leaf, tree)


def trees_equal(a: Any, b: Any) -> bool:
    """Same structure and bitwise-equal leaves (PRNG keys compared by their key data)."""
    a, b = to_host(a), to_host(b)
    if jax.tree.structure(a) != jax.tree.structure(b):
        return False
    pairs = zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    return all(x.dtype == y.dtype and np.array_equal(x, y) for x, y in pairs)


def random_inputs(
    seed: int, n: int, obs_dim: int = NUM_FEATURES, num_objectives: int = 3
) -> tuple[jax.Array, jax.Array]:
    """Observations uniform in [0, 1] and objective weights drawn from the simplex."""
    obs_key, w_key = jax.random.split(jax.random.key(seed))
    obs = jax.random.uniform(obs_key, (n, obs_dim))
    weights = jax.random.dirichlet(w_key, jnp.ones(num_objectives), (n,))
    return obs, weights
