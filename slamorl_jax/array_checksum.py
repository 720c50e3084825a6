"""SHA-256 digests of the arrays in a checkpoint, stored in its ``meta`` and checked at load.

orbax (TensorStore's zarr and OCDBT formats) stores no checksum of array data: a flipped byte in a
chunk decodes to different numbers without an error. A checkpoint therefore carries, in its JSON
``meta``, one digest per array (over dtype, shape and the bytes in C order); loading recomputes the
digests of what was restored and names the first array that differs. Checkpoints written before
digests existed have none and load unchecked.

The ``meta`` JSON itself carries a digest too (:func:`signed_meta`, over its canonical text without
that digest): a changed config value, counter or array digest in it is refused at load instead of
read as another run's settings. Checkpoints written before it have none and load unchecked.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import jax
import numpy as np
from jax.experimental import multihost_utils

META_KEY = "array_sha256"
#: The key of ``meta``'s own digest.
META_DIGEST_KEY = "meta_sha256"


def array_digest(leaf: Any) -> str:
    """SHA-256 (hex) of one array's dtype, shape and C-order bytes."""
    if isinstance(leaf, jax.Array) and not leaf.is_fully_addressable:
        # A multi-process run's env batch: every process gathers the whole array (a collective).
        leaf = multihost_utils.process_allgather(leaf, tiled=True)
    array = np.ascontiguousarray(np.asarray(jax.device_get(leaf)))
    digest = hashlib.sha256(f"{array.dtype.str}{array.shape}".encode())
    digest.update(array.tobytes())
    return digest.hexdigest()


def tree_digests(tree: Any) -> dict[str, str]:
    """``{path: digest}`` of every array in ``tree`` (paths as ``jax.tree_util.keystr`` writes them)."""
    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    return {jax.tree_util.keystr(path): array_digest(leaf) for path, leaf in leaves}


def first_mismatch(tree: Any, expected: dict[str, str]) -> str | None:
    """The path of the first array of ``tree`` whose digest is not ``expected``'s (an array missing
    on either side counts), or ``None`` when all match."""
    actual = tree_digests(tree)
    for path in sorted(set(actual) | set(expected)):
        if actual.get(path) != expected.get(path):
            return path
    return None


def meta_digest(meta: dict[str, Any]) -> str:
    """SHA-256 (hex) of ``meta`` without its :data:`META_DIGEST_KEY`, over its canonical JSON (keys
    sorted, no spaces; tuples as lists, as JSON reads them back)."""
    body = json.loads(json.dumps({k: v for k, v in meta.items() if k != META_DIGEST_KEY}))
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def signed_meta(meta: dict[str, Any]) -> dict[str, Any]:
    """``meta`` with its digest (:data:`META_DIGEST_KEY`) set to what it holds now."""
    return {**meta, META_DIGEST_KEY: meta_digest(meta)}


def meta_digest_matches(meta: dict[str, Any]) -> bool:
    """Whether ``meta`` read from a checkpoint matches its saved digest (one without a digest, saved
    before they existed, matches)."""
    saved = meta.get(META_DIGEST_KEY)
    return saved is None or saved == meta_digest(meta)
