"""A helper process of ``test_sharding.py``: trains the tests' ``TINY`` config over every device it sees.

``python tests/sharded_worker.py [--chunks=N] [--coordinator=host:port --processes=P --process_id=I
--heartbeat_s=S]``: joins the multi-process run if asked, trains ``N`` chunks through the sharded
learner and prints one JSON line per chunk (metrics, a SHA-256 of this process's copy of the
parameters, and the parameters' leaves as lists), so the test can compare runs on different device
and process counts. ``--no_mesh`` trains with plain ``jax.jit`` (the single-device program);
``--global_shuffle`` deals minibatches from all steps shuffled together
(``--minibatch_shuffle=global``; the default is ``TINY``'s, per env); ``--save=DIR`` saves the last
state as a checkpoint there, as a training run does.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys

import jax
import numpy as np


def main() -> None:
    """Parse the arguments, train, print a JSON line per chunk."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--chunks", type=int, default=1)
    parser.add_argument("--coordinator", default=None)
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--process_id", type=int, default=0)
    parser.add_argument("--heartbeat_s", type=int, default=100)
    parser.add_argument("--no_mesh", action="store_true")
    parser.add_argument("--global_shuffle", action="store_true", help="--minibatch_shuffle=global")
    parser.add_argument("--save", default=None, help="checkpoint folder for the last state")
    args = parser.parse_args()
    if args.coordinator:
        from slamorl_jax.distributed import DistributedOptions, initialize

        initialize(
            DistributedOptions(
                enabled=True,
                coordinator_address=args.coordinator,
                num_processes=args.processes,
                process_id=args.process_id,
                heartbeat_timeout_s=args.heartbeat_s,
                initialization_timeout_s=60,
            )
        )
    cache = os.environ.get("SLAMORL_JAX_TEST_CACHE")
    if cache:
        jax.config.update("jax_compilation_cache_dir", cache)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)

    from learner_fixtures import TINY  # this script's folder is on the path

    from slamorl_jax.agent.trainer import env_params_from_config, make_train
    from slamorl_jax.array_checksum import tree_digests
    from slamorl_jax.learner_jit import jit_learner
    from slamorl_jax.sharding import env_mesh

    config = dataclasses.replace(TINY, minibatch_shuffle="global") if args.global_shuffle else TINY
    trainer = make_train(config, mesh=None if args.no_mesh else env_mesh())
    learner = jit_learner(trainer, env_params_from_config(config))
    env_params = learner.place(env_params_from_config(config))
    state = learner.init(learner.place(jax.random.key(config.seed)), env_params)
    for _ in range(args.chunks):
        state, metrics = learner.chunk(state, env_params)
        params = jax.device_get(state.params)
        record = {
            "devices": jax.device_count(),
            "processes": jax.process_count(),
            "update": int(state.update),
            "metrics": {k: float(v) for k, v in jax.device_get(metrics).items()},
            "params_sha256": tree_digests(params),
            "params": [np.asarray(leaf).ravel().tolist() for leaf in jax.tree.leaves(params)],
        }
        print(json.dumps(record), flush=True)
    if args.save:
        from slamorl_jax import checkpoint

        checkpoint.save(checkpoint.make_manager(args.save), state, config)
    sys.exit(0)


if __name__ == "__main__":
    main()
