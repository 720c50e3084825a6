"""Benchmarks of slamorl_jax.

Run each as a module from the repository root, e.g. ``python -m benchmarks.env_throughput``.
"""

from slamorl_jax.cli_start import require_backend

# Run as a program (every benchmark imports this package first, before the package's env): a
# platform the machine lacks is one line and status 2, before the benchmark's imports touch a device.
require_backend()
