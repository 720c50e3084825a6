"""Gymnasium / MO-Gymnasium envs backed by the jitted JAX env, for code outside JAX.

``import slamorl_jax.gym`` registers :data:`ENV_ID` with Gymnasium:

* ``gymnasium.make(ENV_ID)`` or ``mo_gymnasium.make(ENV_ID)``: one job, :class:`JobAllocationMOEnv`;
* ``gymnasium.make_vec(ENV_ID, num_envs=n)``: :class:`JobAllocationVectorEnv`, ``n`` jobs in one
  jitted call (NEXT_STEP autoreset).

Both return the (time, cost, sla) reward vector and carry ``reward_space`` (MO-Gymnasium's
convention); keyword arguments ``scenario``, ``action_set`` and ``params`` choose the jobs.
"""

from slamorl_jax.gym.registration import ENV_ID, register_with_gymnasium
from slamorl_jax.gym.single_env import JobAllocationMOEnv
from slamorl_jax.gym.vector_env import JobAllocationVectorEnv

__all__ = ["ENV_ID", "JobAllocationMOEnv", "JobAllocationVectorEnv"]

register_with_gymnasium()
