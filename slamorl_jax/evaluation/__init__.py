"""Evaluation of a trained policy against baselines, an oracle and ablations.

* :mod:`~slamorl_jax.evaluation.baselines`: where a baseline starts a job and keeps it: the
  user's request, the minimum, the maximum (the reference code's static baseline), the reference
  code's heuristic, and the best static allocation in hindsight (an oracle).
* :mod:`~slamorl_jax.evaluation.reachable`: the best controller reachable with the paper's 9 moves
  in hindsight (walk toward a destination, then hold it; exact search on the noise-free model), an
  anchor for policies restricted to those moves.
* :mod:`~slamorl_jax.evaluation.methods`: the compared methods (policy, its ablations, baselines)
  and running them on the same jobs with the same noise.
* :mod:`~slamorl_jax.evaluation.headline`: per-method summaries, the paper's headline figures and
  the gaps to the two anchors.
* :mod:`~slamorl_jax.evaluation.pareto`: the front over preference vectors, hypervolume and
  expected utility.
* :mod:`~slamorl_jax.evaluation.report`: Markdown, CSV, JSON and plots.

The command is ``python -m slamorl_jax.evaluate``.
"""
