"""The names the history commands and the benchmarks share, without JAX (a command checks its flags
before it imports anything that computes arrays): where a built store's allocations come from, and
which allocation of a job's run a record holds."""

from __future__ import annotations

# ``history build --source`` and ``benchmarks.exploration_overhead --history_source``: each job's best
# static allocation in hindsight, or one the policy ran it on.
SOURCES = ("oracle", "policy")
# ``--recorded`` (a policy's runs, ``history ingest``): the allocation of the job's longest stretch of
# consecutive epochs (the later on a tie), or of its last epoch; each with its words in a store's notes.
RECORDED_WORDS = {"longest": "its longest stretch of consecutive epochs on", "final": "its last epoch on"}
RECORDED = tuple(RECORDED_WORDS)
