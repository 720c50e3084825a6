"""Random draws for the plain-Python job, and its random-action loop (the single-job peer that
``benchmarks/env_throughput.py`` times against the vectorised env)."""

from __future__ import annotations

import numpy as np

from slamorl_jax.env import draws as d
from slamorl_jax.env.action_sets import DEFAULT_ACTION_SET
from slamorl_jax.env.python_job import PythonJob, action_count


class NumpyUniforms:
    """Uniforms and random actions for a :class:`PythonJob` from ``numpy.random.default_rng``.

    Draws blocks of rows (one row = ``STEP_DRAWS`` + ``RESET_DRAWS`` uniforms and an action uniform
    over ``num_actions``, by default the default action set's) and hands them out one step at a time,
    so the single-job loop pays NumPy's call overhead once per block.
    """

    def __init__(self, seed: int, block: int = 1024, num_actions: int | None = None) -> None:
        self.rng = np.random.default_rng(seed)
        self.block = block
        self.num_actions = action_count(DEFAULT_ACTION_SET) if num_actions is None else num_actions
        self._rows: list[list[float]] = []
        self._actions: list[int] = []

    def reset_draws(self) -> list[float]:
        """``RESET_DRAWS`` uniforms for a reset."""
        return self.rng.random(d.RESET_DRAWS).tolist()

    def next_step(self) -> tuple[list[float], list[float], int]:
        """(step uniforms, reset uniforms, action) for one step."""
        if not self._rows:
            self._rows = self.rng.random((self.block, d.STEP_DRAWS + d.RESET_DRAWS)).tolist()
            self._actions = self.rng.integers(0, self.num_actions, self.block).tolist()
        row = self._rows.pop()
        return row[: d.STEP_DRAWS], row[d.STEP_DRAWS :], self._actions.pop()


def run_random_steps(job: PythonJob, source: NumpyUniforms, num_steps: int) -> float:
    """Step ``job`` (already reset) ``num_steps`` times with random actions; the summed reward.

    The actions are uniform over the job's action set (``source.num_actions`` must match it)."""
    if source.num_actions != job.num_actions:
        raise ValueError(
            f"the source draws actions over {source.num_actions}, the job's {job.action_set!r} set has "
            f"{job.num_actions}"
        )
    total = 0.0
    for _ in range(num_steps):
        u_step, u_reset, action = source.next_step()
        _, reward, _, _, _ = job.step(u_step, u_reset, action)
        total += reward[0] + reward[1] + reward[2]
    return total
