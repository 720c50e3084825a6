"""Benchmarks of slamorl_jax.

Run each as a module from the repository root, e.g. ``python -m benchmarks.env_throughput``.
"""
