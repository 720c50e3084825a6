"""What the Gymnasium envs' constructors and ``reset`` take: the scenario's params, checked."""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np

from slamorl_jax.env.job_env import JobAllocationEnv
from slamorl_jax.env.params import EnvParams, with_values
from slamorl_jax.env.scenarios import with_scenario
from slamorl_jax.env.validation import validate_params


def build_params(env: JobAllocationEnv, params: EnvParams | None, scenario: str | None = None) -> EnvParams:
    """``params`` (validated) or the env's scenario defaults (``mixed`` when no ``scenario`` is
    named); ``params`` given with a ``scenario`` draw that scenario's jobs (it was ignored)."""
    if params is None:
        return validate_params(env.default_params)
    return _validated(with_scenario(params, scenario) if scenario is not None else params)


def with_step_limit(params: EnvParams, max_episode_steps: Any) -> EnvParams:
    """``params`` truncating each job after ``max_episode_steps`` decisions (``None``: as they are):
    what ``gymnasium.make_vec`` passes a vector env for the spec's or the caller's limit, where
    ``gymnasium.make`` wraps a single env in ``TimeLimit`` instead. ``ValueError`` for anything but a
    positive integer."""
    if max_episode_steps is None:
        return params
    if (
        isinstance(max_episode_steps, bool | np.bool_)
        or not isinstance(max_episode_steps, int | np.integer)
        or max_episode_steps < 1
    ):
        raise ValueError(f"max_episode_steps must be a positive integer, got {max_episode_steps!r}")
    # The upper bound is validation's (``EnvParams.max_steps_in_episode``), named in its message.
    return _validated(with_values(params, max_steps_in_episode=int(max_episode_steps)))


def _validated(params: EnvParams) -> EnvParams:
    """``validate_params``, its ``TypeError`` for a leaf of the wrong type raised as ``ValueError``:
    ``gymnasium.make`` re-raises a constructor's ``TypeError`` with its keyword arguments appended,
    the whole ``EnvParams`` printed over two hundred lines. (``params`` that are not ``EnvParams``
    at all keep their ``TypeError``.)"""
    try:
        return validate_params(params)
    except TypeError as err:
        if not isinstance(params, EnvParams):
            raise
        raise ValueError(str(err)) from None


def params_option(options: dict[str, Any] | None) -> EnvParams | None:
    """New params from ``reset(options={"env_params": params})`` (gymnax's Gym wrappers' key), validated;
    ``None`` when not given. ``ValueError`` for other keys or a value that is not ``EnvParams``."""
    if options is None:
        return None
    if not isinstance(options, dict):
        what = type(options).__name__
        raise ValueError(f"options must be a dict such as {{'env_params': params}}, got {what}")
    if not options:
        return None
    unknown = sorted(set(options) - {"env_params"})
    if unknown:
        raise ValueError(f"unknown reset option(s) {unknown}; the only option is 'env_params'")
    params = options["env_params"]
    if not isinstance(params, EnvParams):
        raise ValueError(f"options['env_params'] must be EnvParams, got {type(params).__name__}")
    return _validated(params)


def seed_option(seed: Any) -> int | None:
    """``reset``'s ``seed`` as a Python int (``None`` stays ``None``): one integer >= 0, NumPy's
    included (each job's draws derive from it); ``ValueError`` for anything else, bools too."""
    if seed is None:
        return None
    if isinstance(seed, bool | np.bool_) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be one integer >= 0 (every job's draws derive from it), got {seed!r}")
    return int(seed)


def vector_seed_option(seed: Any, num_envs: int) -> int | list[int | None] | None:
    """The vector env's ``reset`` ``seed``, as Gymnasium's vector envs take it: ``None``, one integer
    >= 0 (the whole batch's draws derive from it), or a list (tuple, 1-D array) of ``num_envs`` of
    them, ``None`` entries allowed (each env's own seed, :func:`per_env_seeds`); ``ValueError`` for
    anything else."""
    if isinstance(seed, list | tuple | np.ndarray):
        seeds = list(np.asarray(seed, object).reshape(-1)) if isinstance(seed, np.ndarray) else list(seed)
        if (isinstance(seed, np.ndarray) and seed.ndim != 1) or len(seeds) != num_envs:
            raise ValueError(f"a list of seeds holds one per env: {num_envs}, got {np.shape(seed)}")
        try:
            return [seed_option(one) for one in seeds]
        except ValueError:
            raise ValueError(f"each seed of the list must be an integer >= 0 or None, got {seed!r}") from None
    try:
        return seed_option(seed)
    except ValueError:
        raise ValueError(
            f"seed must be one integer >= 0 or a list of {num_envs}, one per env (None for a random one), "
            f"got {seed!r}"
        ) from None


def per_env_seeds(seeds: list[int | None], rng: np.random.Generator) -> list[int]:
    """The JAX seed of each env of ``reset(seed=[...])``: the one a single env reset with that seed
    draws (:func:`draw_seed` from ``np_random(seed)``), so env ``i`` runs the jobs a single env
    seeded ``seeds[i]`` runs; a ``None`` entry draws from ``rng``, the vector env's own generator."""
    return [draw_seed(rng if one is None else gymnasium.utils.seeding.np_random(one)[0]) for one in seeds]


def draw_seed(rng: np.random.Generator) -> int:
    """A JAX seed drawn from Gymnasium's ``np_random`` (so seeded resets are reproducible)."""
    return int(rng.integers(0, 2**32))


def render_nothing() -> None:
    """The Gymnasium envs' ``render``: nothing to draw. Warns, as Gymnasium's envs made without a
    ``render_mode`` do, and returns ``None``, so code that renders every step runs on."""
    gymnasium.logger.warn("this env does not render (its render_mode is None); render() returns None")
