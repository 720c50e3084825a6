"""The catalogue a run trained on, carried in its checkpoints (``train --catalog``).

A run on a catalogue of its own records the path in its config (``TrainConfig.catalog``) and the
catalogue itself in every checkpoint's ``meta`` under :data:`CATALOG_KEY` (the decoded JSON, about
18 kB; signed with the rest of the meta). What reads a checkpoint — ``load_policy``,
``export_policy``, ``--resume`` — takes that copy, so a policy runs on the workloads, GPU types and
prices it learnt on wherever it is loaded, and a resumed run keeps its world if the file has moved
or changed since. A run on the shipped catalogue stores nothing here (checkpoints of earlier
versions hold none either).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from slamorl_jax.checkpoint import CheckpointError
from slamorl_jax.env.catalog import (
    PARSE_ERRORS,
    Catalog,
    catalog_problem,
    is_shipped,
    load_catalog,
    parse_catalog,
)

#: A checkpoint meta's key for the catalogue of a run on one of its own.
CATALOG_KEY = "catalog"


def catalog_meta(catalog: Catalog | None) -> dict[str, Any]:
    """The ``meta`` entries recording ``catalog``: none for the shipped one (or ``None``), else its
    decoded JSON under :data:`CATALOG_KEY`."""
    if catalog is None or is_shipped(catalog):
        return {}
    return {CATALOG_KEY: catalog.raw}


def stored_catalog(meta: dict[str, Any], where: str | Path) -> Catalog:
    """The catalogue a checkpoint's ``meta`` carries, else the shipped one; ``CheckpointError``
    naming ``where`` for a copy this version cannot read (another format version, a field it lacks)."""
    if CATALOG_KEY not in meta:
        return load_catalog()
    try:
        return parse_catalog(meta[CATALOG_KEY])
    except PARSE_ERRORS as err:
        raise CheckpointError(
            f"checkpoint {where}: its catalogue cannot be read ({catalog_problem(err)})"
        ) from None
