"""The re-allocation pattern counts of ``benchmarks/reallocation_patterns.py`` on hand-made paths."""

from __future__ import annotations

import numpy as np

from benchmarks.reallocation_patterns import pattern_counts


def test_moves_gpu_moves_and_flips_by_hand() -> None:
    """Job 0 flips between two CPU counts, job 1 moves its GPUs once and ends early (its later
    epochs, after the end, count for nothing), job 2 moves once and relocates twice (once before
    its first epoch, which is not counted: the counts compare epochs), job 1 relocates after its
    end (not counted either). Of job 2's counted relocations, the one after an epoch its nodes
    slowed counts as after a slowed epoch; a slowed epoch with no relocation after it adds nothing."""
    gpus = np.array([[4, 2, 1], [4, 2, 1], [4, 8, 1], [4, 8, 9], [4, 1, 9]])
    cpus = np.array([[16, 8, 4], [32, 8, 4], [16, 32, 4], [32, 32, 4], [16, 4, 4]])
    running = np.array([[1, 1, 1], [1, 1, 1], [1, 1, 1], [1, 1, 1], [1, 0, 1]], bool)
    relocated = np.array([[0, 0, 1], [0, 0, 1], [0, 0, 0], [0, 0, 1], [0, 1, 0]], bool)
    slowed = np.array([[0, 0, 1], [1, 0, 0], [0, 1, 0], [0, 0, 0], [0, 0, 0]], bool)
    counts = pattern_counts(gpus, cpus, running, relocated, slowed)
    np.testing.assert_array_equal(counts["epochs"], [5, 4, 5])
    np.testing.assert_array_equal(counts["reallocations"], [4, 1, 1])
    np.testing.assert_array_equal(counts["gpu_reallocations"], [0, 1, 1])
    # job 0: epochs 2, 3 and 4 each return to the allocation two epochs before
    np.testing.assert_array_equal(counts["flips"], [3, 0, 0])
    np.testing.assert_array_equal(counts["relocations"], [0, 0, 2])
    np.testing.assert_array_equal(counts["relocations_after_slowed"], [0, 0, 1])
    assert "relocations_after_slowed" not in pattern_counts(gpus, cpus, running, relocated)


def test_probability_of_the_moves_sums_over_re_allocations_only() -> None:
    """The probability of the action that chose each epoch's allocation is summed over the epochs
    whose allocation differs from the one before, while the job runs: a kept allocation, the first
    epoch (chosen from the request, not compared) and an epoch after the job's end add nothing."""
    gpus = np.array([[1, 2], [1, 2], [1, 4], [1, 8]])
    cpus = np.array([[4, 8], [8, 8], [4, 16], [8, 16]])
    running = np.array([[1, 1], [1, 1], [1, 1], [1, 0]], bool)
    relocated = np.zeros_like(running)
    chosen = np.array([[0.9, 0.9], [0.4, 0.8], [0.3, 0.7], [0.5, 0.2]])
    counts = pattern_counts(gpus, cpus, running, relocated, chosen_probability=chosen)
    np.testing.assert_array_equal(counts["reallocations"], [3, 1])
    np.testing.assert_allclose(counts["move_probability_sum"], [0.4 + 0.3 + 0.5, 0.7])
