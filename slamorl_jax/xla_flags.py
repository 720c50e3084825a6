"""XLA settings for a process about to start JAX: flag sets, fake CPU devices, a probe for unknown flags.

JAX reads ``XLA_FLAGS`` once, when it starts, so a process meant to run on N fake CPU devices (or
with any other XLA setting) must be started with the flag in its environment. Used by the local
multi-process launcher, the scaling and compile-flag benchmarks, the sharding tests and the test
suite's compile settings (``tests/conftest.py``). Importing this module does not start JAX.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping

DEVICE_COUNT_FLAG = "--xla_force_host_platform_device_count"
LLVM_LEVEL_FLAG = "--xla_backend_optimization_level"
FUSION_EMITTERS_FLAG = "--xla_cpu_use_fusion_emitters"

# Programs compiled for a few steps of a few envs, as in the test suite: LLVM at -O0 and XLA:CPU's
# older loop emitters instead of its MLIR fusion emitters. The env's step compiles about 3x faster
# and runs more slowly (benchmarks/compile_flags.py); the default suite takes 0.65x the time (BUILD.md).
FAST_COMPILE_FLAGS: dict[str, object] = {LLVM_LEVEL_FLAG: 0, FUSION_EMITTERS_FLAG: "false"}


def with_xla_flags(flags: Mapping[str, object], base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with each ``flag=value`` in ``XLA_FLAGS``; the
    other flags are kept, an earlier value of each given flag is replaced."""
    env = dict(os.environ if base is None else base)
    kept = [f for f in env.get("XLA_FLAGS", "").split() if f.split("=", 1)[0] not in flags]
    env["XLA_FLAGS"] = " ".join([*kept, *(f"{flag}={value}" for flag, value in flags.items())])
    return env


def fake_cpu_devices_env(devices: int, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with JAX on the CPU and ``devices`` fake
    devices; the other ``XLA_FLAGS`` are kept, an earlier device count is replaced."""
    return {**with_xla_flags({DEVICE_COUNT_FLAG: devices}, base), "JAX_PLATFORMS": "cpu"}


def xla_accepts(flags: Mapping[str, object], timeout_s: float = 120.0) -> bool:
    """Whether this jaxlib's XLA knows every flag in ``flags``: XLA aborts a process whose
    ``XLA_FLAGS`` names a flag it does not know, and flags come and go between versions, so a child
    process starts JAX's CPU backend with them (about a second)."""
    env = {**with_xla_flags(flags), "JAX_PLATFORMS": "cpu"}
    try:
        done = subprocess.run(
            [sys.executable, "-c", "import jax; jax.devices()"],
            env=env,
            capture_output=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0
