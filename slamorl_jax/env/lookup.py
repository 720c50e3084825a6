"""Table look-ups that stay fast under ``vmap``.

XLA on CPU runs each gather as its own loop, so twenty per-field gathers cost far more than one gather
of a packed row. ``pack_table`` packs a pytree of equally indexed tables into one matrix, ``unpack_row``
reads rows of it back, ``gather_row`` does both around one gather; ``take_small`` selects from a short
vector with elementwise compares instead of a gather.
"""

from __future__ import annotations

import math
from typing import Any, TypeVar

import jax
import jax.numpy as jnp

T = TypeVar("T")


def pack_table(tables: Any) -> jax.Array:
    """A pytree of equally indexed tables as one float32 matrix ``[n, F]``, one row per index.

    Every leaf must have the same leading size ``n`` after flattening its leading axes to the
    shape of the first leaf's; integers and booleans travel as float32 (exact below 2**24).
    """
    leaves = jax.tree.leaves(tables)
    n = leaves[0].size
    return jnp.concatenate([leaf.reshape(n, -1).astype(jnp.float32) for leaf in leaves], axis=1)


def unpack_row(packed_rows: jax.Array, template: T) -> T:
    """Rows of :func:`pack_table`'s matrix back into ``template``'s structure (its leaves' trailing
    shapes and dtypes; ``template`` may be the tables themselves or ``jax.eval_shape`` of them)."""
    leaves, treedef = jax.tree.flatten(template)
    lead_ndim = len(leaves[0].shape)
    out, start = [], 0
    for leaf in leaves:
        trailing = tuple(leaf.shape[lead_ndim:])
        width = math.prod(trailing)
        piece = packed_rows[..., start : start + width].reshape(packed_rows.shape[:-1] + trailing)
        start += width
        out.append(piece > 0.5 if leaf.dtype == jnp.bool_ else piece.astype(leaf.dtype))
    return jax.tree.unflatten(treedef, out)


def gather_row(tables: T, index: jax.Array) -> T:
    """``tree.map(lambda t: t.reshape(n, ...)[index], tables)`` done as a single gather
    (:func:`pack_table`, one row gather, :func:`unpack_row`)."""
    return unpack_row(pack_table(tables)[index], tables)


def take_small(table: jax.Array, index: jax.Array) -> jax.Array | tuple[jax.Array, ...]:
    """``table[index]`` for a short table by compare-and-select (no gather).

    A 1-D table gives a scalar; a 2-D table gives its row as a tuple of scalars (under ``vmap``
    each a contiguous array rather than a strided column of a stacked one).
    """
    if table.ndim == 1:
        return sum(jnp.where(index == k, table[k], jnp.zeros_like(table[k])) for k in range(table.shape[0]))
    return tuple(take_small(table[:, c], index) for c in range(table.shape[1]))
