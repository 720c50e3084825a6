"""XLA flag sets for child processes (``slamorl_jax.xla_flags``) and the suite's compile settings."""

from __future__ import annotations

import os

from slamorl_jax.xla_flags import (
    FAST_COMPILE_FLAGS,
    FUSION_EMITTERS_FLAG,
    LLVM_LEVEL_FLAG,
    with_xla_flags,
    xla_accepts,
)


def test_with_xla_flags_replaces_given_flags_and_keeps_the_others() -> None:
    """Each given flag replaces its earlier value (not a flag it is a prefix of); the rest stay in order."""
    base = {
        "XLA_FLAGS": f"{LLVM_LEVEL_FLAG}=3 --xla_force_host_platform_device_count=2 {LLVM_LEVEL_FLAG}x=1",
        "OTHER": "kept",
    }
    env = with_xla_flags(FAST_COMPILE_FLAGS, base)
    assert env["XLA_FLAGS"].split() == [
        "--xla_force_host_platform_device_count=2",
        f"{LLVM_LEVEL_FLAG}x=1",
        f"{LLVM_LEVEL_FLAG}=0",
        f"{FUSION_EMITTERS_FLAG}=false",
    ]
    assert env["OTHER"] == "kept" and base["XLA_FLAGS"].startswith(f"{LLVM_LEVEL_FLAG}=3")
    assert with_xla_flags({}, {})["XLA_FLAGS"] == ""


def test_xla_accepts_known_flags_and_refuses_an_unknown_one() -> None:
    """XLA aborts on a flag it does not know; the probe says so instead of failing the caller."""
    assert xla_accepts({LLVM_LEVEL_FLAG: 1})
    assert not xla_accepts({"--xla_no_such_flag_in_any_version": "true"})


def test_the_suite_runs_with_an_llvm_level_set() -> None:
    """conftest set the suite's compile settings before JAX started (or kept the caller's level)."""
    assert LLVM_LEVEL_FLAG in os.environ.get("XLA_FLAGS", "")
    assert os.environ["SLAMORL_JAX_TEST_BACKEND_STARTED_FIRST"] == "0"  # XLA still read them
