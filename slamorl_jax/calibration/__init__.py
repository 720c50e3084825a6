"""Calibration of the simulator against published measurements.

Sources: Pollux, Gavel, Synergy, AWS prices, Alibaba GPU trace.

Run ``python -m slamorl_jax.calibration`` to refit everything from the vendored data in
``slamorl_jax/calibration/data/`` and rewrite ``slamorl_jax/env/calibrated_workloads.json``.
The formulas themselves live in :mod:`slamorl_jax.env.throughput`; this package only fits their
parameters. Modules:

* :mod:`~slamorl_jax.calibration.loaders` - readers of the vendored files;
* :mod:`~slamorl_jax.calibration.model` - float64 evaluation of the throughput model;
* :mod:`~slamorl_jax.calibration.lsq` - bounded least squares on log throughput;
* :mod:`~slamorl_jax.calibration.pollux_fit` / :mod:`~slamorl_jax.calibration.gavel_fit` -
  step-time fits;
* :mod:`~slamorl_jax.calibration.gpu_speed` - per-GPU-type compute speeds;
* :mod:`~slamorl_jax.calibration.cpu_profiles` - Synergy CPU factor fits;
* :mod:`~slamorl_jax.calibration.prices` - AWS unit prices;
* :mod:`~slamorl_jax.calibration.requested` - requested GPU / CPU distributions;
* :mod:`~slamorl_jax.calibration.workloads` - the 13 workloads' static facts and mappings;
* :mod:`~slamorl_jax.calibration.build` - assembles and writes the JSON.

Only the fitting functions import SciPy, so loading the package (and the tests that re-check the
shipped JSON) needs NumPy and JAX alone.
"""
