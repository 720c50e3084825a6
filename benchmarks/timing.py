"""Timing harness shared by the benchmarks.

* Compile time is measured apart: ``jax.jit(fn).lower(*args).compile()`` is timed on its own.
* Every compiled function is called once to warm up before it is timed, and every timed call ends
  with ``jax.block_until_ready``.
* Each figure is repeated; reports give the median and the best.
* Candidates that are compared are timed in turns (A, B, A, B, ...) so machine noise hits them alike.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable, Mapping
from typing import Any

import jax


@dataclasses.dataclass
class Timing:
    """Compile time and the wall times of repeated calls that each do ``work`` units (e.g. env steps)."""

    work: float
    compile_s: float = 0.0
    run_s: list[float] = dataclasses.field(default_factory=list)

    @property
    def median_rate(self) -> float:
        """Work per second of the median call."""
        return self.work / statistics.median(self.run_s)

    @property
    def best_rate(self) -> float:
        """Work per second of the fastest call."""
        return self.work / min(self.run_s)

    def as_dict(self, unit: str = "steps") -> dict[str, Any]:
        """JSON-ready summary."""
        return {
            f"{unit}_per_call": self.work,
            "compile_s": self.compile_s,
            "run_s": self.run_s,
            f"{unit}_per_s_median": self.median_rate,
            f"{unit}_per_s_best": self.best_rate,
        }


def compile_timed(fn: Callable[..., Any], *args: Any) -> tuple[Callable[..., Any], float]:
    """Jit, lower and compile ``fn`` for ``args``; the executable and the seconds it took."""
    start = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    return compiled, time.perf_counter() - start


def time_call(compiled: Callable[..., Any], *args: Any) -> float:
    """Wall seconds of one call, up to ``block_until_ready`` on its outputs."""
    start = time.perf_counter()
    jax.block_until_ready(compiled(*args))
    return time.perf_counter() - start


def interleaved_timings(
    candidates: Mapping[str, tuple[Callable[..., Any], tuple[Any, ...], Timing]], repeats: int
) -> None:
    """Warm each compiled candidate up once, then time them in turns ``repeats`` times.

    ``candidates`` maps a name to (compiled function, its arguments, the ``Timing`` to fill).
    """
    for compiled, args, _ in candidates.values():
        jax.block_until_ready(compiled(*args))
    for _ in range(repeats):
        for compiled, args, timing in candidates.values():
            timing.run_s.append(time_call(compiled, *args))


def time_python_loop(
    step_chunk: Callable[[int], Any], seconds: float, repeats: int, chunk: int = 500
) -> Timing:
    """Steps per second of a host loop; ``step_chunk(n)`` runs ``n`` steps.

    One chunk warms up; then each of ``repeats`` windows of ``seconds / repeats`` runs whole chunks
    (at least one, however short the window) and is recorded as its mean seconds per chunk
    (``Timing.work`` = ``chunk`` steps).
    """
    step_chunk(chunk)
    window = seconds / repeats
    rates = []
    for _ in range(repeats):
        steps, start = 0, time.perf_counter()
        while steps == 0 or (time.perf_counter() - start) < window:
            step_chunk(chunk)
            steps += chunk
        rates.append(steps / (time.perf_counter() - start))
    work = float(chunk)
    return Timing(work=work, run_s=[work / r for r in rates])
