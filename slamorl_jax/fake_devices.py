"""Environments for child processes: one XLA flag set, or ``devices`` fake CPU devices.

JAX reads ``XLA_FLAGS`` once, when it starts, so a process meant to run on N fake CPU devices (or
with any other XLA setting) must be started with the flag in its environment. Used by the local
multi-process launcher, the scaling and compile-level benchmarks and the sharding tests.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

DEVICE_COUNT_FLAG = "--xla_force_host_platform_device_count"


def with_xla_flag(flag: str, value: object, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with ``flag=value`` in ``XLA_FLAGS``; the other
    flags are kept, an earlier value of ``flag`` is replaced."""
    env = dict(os.environ if base is None else base)
    flags = [f for f in env.get("XLA_FLAGS", "").split() if not f.startswith(flag)]
    env["XLA_FLAGS"] = " ".join([*flags, f"{flag}={value}"])
    return env


def fake_cpu_devices_env(devices: int, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with JAX on the CPU and ``devices`` fake
    devices; the other ``XLA_FLAGS`` are kept, an earlier device count is replaced."""
    return {**with_xla_flag(DEVICE_COUNT_FLAG, devices, base), "JAX_PLATFORMS": "cpu"}
