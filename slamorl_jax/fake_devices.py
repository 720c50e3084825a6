"""The environment of a child process that sees ``devices`` fake CPU devices (XLA's host platform).

JAX fixes its device count when it starts, so a process meant to run on N fake CPU devices must be
started with ``--xla_force_host_platform_device_count=N`` in ``XLA_FLAGS``. Used by the local
multi-process launcher, the scaling benchmark and the sharding tests.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

DEVICE_COUNT_FLAG = "--xla_force_host_platform_device_count"


def fake_cpu_devices_env(devices: int, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with JAX on the CPU and ``devices`` fake
    devices; the other ``XLA_FLAGS`` are kept, an earlier device count is replaced."""
    env = dict(os.environ if base is None else base)
    flags = [f for f in env.get("XLA_FLAGS", "").split() if not f.startswith(DEVICE_COUNT_FLAG)]
    env["XLA_FLAGS"] = " ".join([*flags, f"{DEVICE_COUNT_FLAG}={devices}"])
    env["JAX_PLATFORMS"] = "cpu"
    return env
