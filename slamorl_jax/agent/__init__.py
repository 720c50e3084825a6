"""The learner: ``networks`` (the actor-critic), ``gae`` (per-objective advantages), ``losses`` (the
PPO loss with the adaptive weights), ``imitation`` (pre-training on demonstrations), ``schedule``,
``config`` (``TrainConfig``), ``config_checks`` (its checks), ``network_priors`` (the actor's priors)
and ``trainer`` (``make_train``: the jittable update).
Import from the modules (``from slamorl_jax.agent.trainer import make_train``)."""
