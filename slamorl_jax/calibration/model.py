"""Thin wrappers that evaluate :mod:`slamorl_jax.env.throughput` for the fits and the tests.

The formulas live only in ``throughput.py``; this module composes them into "samples per second of
``k`` GPUs on ``n`` nodes at per-GPU batch ``m``" for an 8-parameter vector and evaluates them in
float64 (inside ``jax.enable_x64``) so fitted numbers do not depend on JAX's default precision.
No SciPy here: the fast tests import this module.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import astuple, dataclass

import jax
import jax.numpy as jnp
import numpy as np

from slamorl_jax.env import throughput

#: Order of the parameter vector used by the fits.
PARAM_NAMES: tuple[str, ...] = (
    "compute_alpha_s",
    "compute_beta_s",
    "sync_local_alpha_s",
    "sync_local_beta_s",
    "sync_node_alpha_s",
    "sync_node_beta_s",
    "gamma",
    "sync_two_node_factor",
)


@dataclass(frozen=True)
class StepModel:
    """Parameters of the Pollux step-time model of one workload (seconds; ``gamma`` unitless)."""

    compute_alpha_s: float
    compute_beta_s: float
    sync_local_alpha_s: float
    sync_local_beta_s: float
    sync_node_alpha_s: float
    sync_node_beta_s: float
    gamma: float
    sync_two_node_factor: float = 1.0

    def as_array(self) -> np.ndarray:
        """The parameters in :data:`PARAM_NAMES` order."""
        return np.asarray(astuple(self), dtype=np.float64)

    @classmethod
    def from_array(cls, theta: Sequence[float] | np.ndarray) -> StepModel:
        """Inverse of :meth:`as_array`."""
        return cls(*(float(x) for x in np.asarray(theta, dtype=np.float64)))

    @classmethod
    def from_mapping(cls, d: Mapping[str, float]) -> StepModel:
        """Read the parameters from a workload entry of the calibrated JSON."""
        return cls(*(float(d[k]) for k in PARAM_NAMES))


def samples_per_s_jax(
    theta: jnp.ndarray,
    num_gpus: jnp.ndarray,
    num_nodes: jnp.ndarray,
    local_batch: jnp.ndarray,
    compute_speed: jnp.ndarray | float = 1.0,
) -> jnp.ndarray:
    """Model throughput (samples/s) for a parameter vector in :data:`PARAM_NAMES` order.

    ``compute_speed`` divides the compute time (a GPU type relative to the calibration GPU).
    Differentiable in ``theta``; used inside the least-squares residuals.
    """
    t_comp = throughput.compute_time(theta[0], theta[1], local_batch) / compute_speed
    t_sync = throughput.sync_time(
        num_gpus, num_nodes, theta[2], theta[3], theta[4], theta[5], two_node_factor=theta[7]
    )
    t_step = throughput.step_time(t_comp, t_sync, theta[6])
    return throughput.samples_per_second(num_gpus, local_batch, t_step)


_samples_per_s_jit = jax.jit(samples_per_s_jax)


def predict_samples_per_s(
    model: StepModel | np.ndarray,
    num_gpus: np.ndarray,
    num_nodes: np.ndarray,
    local_batch: np.ndarray | float,
    compute_speed: float = 1.0,
) -> np.ndarray:
    """NumPy float64 throughput of ``model`` (samples/s) at each configuration."""
    theta = model.as_array() if isinstance(model, StepModel) else np.asarray(model, np.float64)
    k = np.asarray(num_gpus, dtype=np.float64)
    n = np.asarray(num_nodes, dtype=np.float64)
    m = np.broadcast_to(np.asarray(local_batch, dtype=np.float64), k.shape)
    with jax.enable_x64(True):
        out = _samples_per_s_jit(
            jnp.asarray(theta),
            jnp.asarray(k),
            jnp.asarray(n),
            jnp.asarray(m),
            jnp.asarray(compute_speed, dtype=jnp.float64),
        )
        return np.asarray(out, dtype=np.float64)


def relative_errors(predicted: np.ndarray, measured: np.ndarray) -> np.ndarray:
    """``|predicted - measured| / measured`` element-wise."""
    predicted = np.asarray(predicted, dtype=np.float64)
    measured = np.asarray(measured, dtype=np.float64)
    return np.abs(predicted - measured) / measured
