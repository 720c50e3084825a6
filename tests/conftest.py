"""Shared test configuration: JAX's persistent compilation cache, hypothesis profiles, the env."""

from __future__ import annotations

import os
from pathlib import Path

import jax
import pytest
from hypothesis import HealthCheck, settings

from slamorl_jax.env import JobAllocationEnv, load_catalog

CACHE_DIR = Path(
    os.environ.get("SLAMORL_JAX_TEST_CACHE", Path(__file__).resolve().parent.parent / ".jax_cache")
)
jax.config.update("jax_compilation_cache_dir", str(CACHE_DIR))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)

settings.register_profile(
    "default",
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("thorough", max_examples=300, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture(scope="session")
def env() -> JobAllocationEnv:
    """The environment on the shipped calibrated catalogue."""
    return JobAllocationEnv(load_catalog())
