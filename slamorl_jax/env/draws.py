"""Layout of the uniform draws that drive the environment.

``reset`` consumes ``RESET_DRAWS`` uniforms and ``step`` consumes ``STEP_DRAWS`` (then ``RESET_DRAWS``
more for its auto-reset), all from one call of :func:`uniforms` per function. Naming each slot
lets an independent implementation (``slamorl_jax.env.python_job``) replay exactly the same episode
from the same numbers.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

# Reset slots.
WORKLOAD = 0
GPU_TYPE = 1
EPOCHS = 2
SCENARIO = 3
RANDOM_PREFERENCE = 4
PREFERENCE = (5, 6)  # two uniforms -> a uniform point on the simplex (sorted spacings)
SLA_FACTORS = (7, 8, 9, 10, 11, 12)  # one per SLA
REQUESTED_GPUS = 13
REQUESTED_CPUS = 14
INIT_GPUS = 15
INIT_CPUS = 16
CONTENTION_AT_START = 17
COMPUTE_DEVIATION = 18  # the job's hidden deviations from its profile (job_truth.py)
SYNC_DEVIATION = 19
INIT_MIX = 20  # which start a ``mixed`` initialisation takes
SHIFT_KIND = 21  # the job's mid-run event (shifts.py): its kind, epoch and size
SHIFT_EPOCH = 22
SHIFT_SIZE = 23
RESET_DRAWS = 24

# Step slots.
EPOCH_NOISE = 0
CONTENTION_SWITCH = 1
GPU_UTIL_NOISE = 2
CPU_UTIL_NOISE = 3
STEP_DRAWS = 4


GOLDEN = 0x9E3779B9  # 2**32 / golden ratio: spreads the slot counter over the 32-bit words
UNIFORM_BITS = 24


def _mix32(x: jax.Array) -> jax.Array:
    """MurmurHash3's 32-bit finaliser: a bijection of uint32 with full avalanche."""
    x = x ^ (x >> 16)
    x = x * jnp.uint32(0x85EBCA6B)
    x = x ^ (x >> 13)
    x = x * jnp.uint32(0xC2B2AE35)
    return x ^ (x >> 16)


def is_typed_key(key: Any) -> bool:
    """Whether ``key`` (or a batch of them) holds typed keys (``jax.random.key``), not raw ``uint32``
    key data (``jax.random.PRNGKey``): its dtype says so, statically."""
    dtype = getattr(key, "dtype", None)
    return dtype is not None and jnp.issubdtype(dtype, jax.dtypes.prng_key)


def check_key(key: Any, name: str = "key", hint: str = "") -> bool:
    """Raise ``TypeError`` unless ``key`` is one JAX PRNG key: a typed key (``jax.random.key``;
    returns ``True``) or raw ``uint32`` key data (``jax.random.PRNGKey``; ``False``). Shapes and
    dtypes are static, so the check costs nothing in a compiled program."""
    dtype, shape = getattr(key, "dtype", None), getattr(key, "shape", None)
    typed = is_typed_key(key)
    # raw key data: 2 words (threefry) or 4 (rbg, unsafe_rbg); 3 zeros are no key of any JAX PRNG
    if not (shape == () if typed else dtype == jnp.uint32 and shape in ((2,), (4,))):
        raise TypeError(
            f"{name} must be one JAX PRNG key (jax.random.key(seed)); got "
            + (f"{dtype} of shape {shape}" if dtype is not None else type(key).__name__)
            + hint
        )
    return bool(typed)


def key_words(key: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Two 32-bit words of the key's own random bits (its first and last words).

    ``key`` is one JAX PRNG key: a typed key (``jax.random.key``) or raw ``uint32`` key data
    (``jax.random.PRNGKey``); anything else raises ``TypeError`` when traced (shapes and dtypes are
    static, so the check costs nothing in a compiled step)."""
    typed = check_key(key, hint=" (vmap the env over a batch of keys)")
    data = jax.random.key_data(key) if typed else key
    data = data.astype(jnp.uint32)
    return data[..., 0], data[..., -1]


def uniforms(key: jax.Array, count: int, first: int = 0) -> tuple[jax.Array, ...]:
    """``count`` float32 uniforms in [0, 1) (24-bit grid) hashed from the key's 64 bits: the key's
    slots ``first`` to ``first + count - 1`` (each slot is hashed on its own, so a caller that needs
    only the later slots, such as the reset draws after the step draws, computes only those).

    A key handed to the environment is already the output of ``jax.random.split`` (or a seed), so
    its words are used as the entropy directly: each slot ``k`` hashes
    ``w0 ^ (w1 * (2k + 1)) + k * GOLDEN`` through MurmurHash3's finaliser. This avoids a
    counter-based block per step (the largest single cost of a vectorised step on CPU), and every
    uniform is a separate scalar, so under ``vmap`` each one is a contiguous array that XLA on CPU
    keeps vectorised. Returned as a tuple indexed by the slot names above. As with any JAX random
    function, never use one key twice.
    """
    w0, w1 = key_words(key)
    scale = jnp.float32(1.0 / (1 << UNIFORM_BITS))
    out = []
    for k in range(first, first + count):
        mixed = _mix32((w0 ^ (w1 * jnp.uint32(2 * k + 1))) + jnp.uint32((k * GOLDEN) & 0xFFFFFFFF))
        out.append((mixed >> (32 - UNIFORM_BITS)).astype(jnp.float32) * scale)
    return tuple(out)


def as_tuple(u: jax.Array | tuple[jax.Array, ...] | list[jax.Array]) -> tuple[jax.Array, ...]:
    """Uniforms as a tuple of scalars; an array of draws (e.g. from a test) is split along its last axis."""
    if isinstance(u, (tuple, list)):
        return tuple(u)
    return tuple(u[..., i] for i in range(u.shape[-1]))


def categorical(u: jax.Array, probs: jax.Array) -> jax.Array:
    """Index drawn from ``probs`` by inverse CDF of the uniform ``u`` (zero-probability bins never)."""
    return categorical_from_cdf(u, jnp.cumsum(probs / jnp.sum(probs)))


def categorical_from_cdf(u: jax.Array, cdf: jax.Array) -> jax.Array:
    """Index drawn by inverse CDF: the number of cumulative probabilities (but the last) <= ``u``,
    counting only those below the total ``cdf[..., -1]`` (one equal to it ends the bins that carry
    probability), so trailing zero-probability bins are never drawn: in float32 the sum before them
    may round below 1, and a ``u`` in the sliver between drew them (a masked last action, a scenario
    kind the params exclude)."""
    thresholds = cdf[..., :-1]
    drawable = (u[..., None] >= thresholds) & (thresholds < cdf[..., -1:])
    return jnp.sum(drawable, axis=-1, dtype=jnp.int32)


def uniform_int(u: jax.Array, low: jax.Array, high: jax.Array) -> jax.Array:
    """Integer uniform on ``[low, high]`` from the uniform ``u``."""
    span = (high - low + 1).astype(jnp.float32)
    return jnp.minimum(low + jnp.floor(u * span).astype(jnp.int32), high)


def uniform_simplex(u0: jax.Array, u1: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """A uniform point on the 3-simplex from two uniforms: the spacings of their sorted values."""
    low = jnp.minimum(u0, u1)
    high = jnp.maximum(u0, u1)
    return low, high - low, 1.0 - high


def standard_normal_approx(u: jax.Array) -> jax.Array:
    """A unit-variance logistic deviate: a cheap stand-in for a normal (one log, no erfinv)."""
    u = jnp.clip(u, 1e-5, 1.0 - 1e-5)
    return jnp.log(u / (1.0 - u)) * (jnp.sqrt(3.0) / jnp.pi)
