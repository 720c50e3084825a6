"""A helper process of ``test_batched_step.py``: the env step on a batch split over every device.

``python tests/sharded_step_worker.py`` (run with several fake CPU devices) steps ``NUM_ENVS`` short
jobs ``STEPS`` times through ``step_envs`` with the device mesh (``step_batch`` on each device's
share, under ``jax.shard_map``) and, from the same state, key and action, through the single-device
``step_batch``; it checks every output agrees to float32 rounding and prints one JSON line: the
device count, whether the sharded step's program holds a ``shard_map``, and the most jobs that
finished on one device in one step (more than its one reset slot means several rounds there).
"""

from __future__ import annotations

import json
import os

import jax
import numpy as np

NUM_ENVS = 32
STEPS = 10


def main() -> None:
    """Step both ways, compare, print the JSON line."""
    from slamorl_jax.compilation_cache import enable_compilation_cache

    enable_compilation_cache(os.environ.get("SLAMORL_JAX_TEST_CACHE", ""))
    from slamorl_jax.env import JobAllocationEnv
    from slamorl_jax.env.batched_step import step_envs
    from slamorl_jax.sharding import env_mesh
    from tests.test_env_api import assert_trees_close, with_epochs

    env = JobAllocationEnv()
    params = with_epochs(env.default_params, 1, 3)
    mesh = env_mesh()
    sharded = jax.jit(lambda k, s, a, p: step_envs(env, k, s, a, p, mesh=mesh))
    single = jax.jit(lambda k, s, a, p: step_envs(env, k, s, a, p))
    key = jax.random.key(3)
    _, state = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(jax.random.split(key, NUM_ENVS), params)
    most_on_one_device = 0
    for step_key in jax.random.split(key, STEPS):
        action_key, env_key = jax.random.split(step_key)
        actions = jax.random.randint(action_key, (NUM_ENVS,), 0, env.num_actions)
        keys = jax.random.split(env_key, NUM_ENVS)
        expected = single(keys, state, actions, params)
        assert_trees_close(jax.device_get(sharded(keys, state, actions, params)), expected)
        ended = np.asarray(expected[3] | expected[4]).reshape(mesh.size, -1).sum(axis=1)
        most_on_one_device = max(most_on_one_device, int(ended.max()))
        state = expected[1]
    jaxpr = str(jax.make_jaxpr(sharded)(keys, state, actions, params))
    record = {
        "devices": mesh.size,
        "shard_map": "shard_map" in jaxpr,
        "most_ended_on_one_device": most_on_one_device,
    }
    print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
