"""Table look-ups that stay fast under ``vmap``.

XLA on CPU runs each gather as its own loop, so twenty per-field gathers cost far more than one
gather of a packed row. ``gather_row`` packs a pytree of equally indexed tables into one matrix and
gathers once; ``take_small`` selects from a short vector with elementwise compares instead of a gather.
"""

from __future__ import annotations

import math
from typing import TypeVar

import jax
import jax.numpy as jnp

T = TypeVar("T")


def gather_row(tables: T, index: jax.Array) -> T:
    """``tree.map(lambda t: t.reshape(n, ...)[index], tables)`` done as a single gather.

    Every leaf must have the same leading size ``n`` (after flattening its leading axes to the
    shape of the first leaf's); values travel as float32 and come back in their own dtype.
    """
    leaves, treedef = jax.tree.flatten(tables)
    lead = leaves[0].shape
    n = leaves[0].size
    columns, shapes = [], []
    for leaf in leaves:
        trailing = leaf.shape[len(lead) :]
        shapes.append(trailing)
        columns.append(leaf.reshape(n, -1).astype(jnp.float32))
    packed = jnp.concatenate(columns, axis=1)[index]
    out, start = [], 0
    for leaf, trailing in zip(leaves, shapes, strict=True):
        width = math.prod(trailing)
        piece = packed[..., start : start + width].reshape(index.shape + trailing)
        start += width
        out.append(piece > 0.5 if leaf.dtype == jnp.bool_ else piece.astype(leaf.dtype))
    return jax.tree.unflatten(treedef, out)


def take_small(table: jax.Array, index: jax.Array) -> jax.Array | tuple[jax.Array, ...]:
    """``table[index]`` for a short table by compare-and-select (no gather).

    A 1-D table gives a scalar; a 2-D table gives its row as a tuple of scalars (under ``vmap``
    each a contiguous array rather than a strided column of a stacked one).
    """
    if table.ndim == 1:
        return sum(jnp.where(index == k, table[k], jnp.zeros_like(table[k])) for k in range(table.shape[0]))
    return tuple(take_small(table[:, c], index) for c in range(table.shape[1]))
