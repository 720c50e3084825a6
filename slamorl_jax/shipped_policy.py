"""The shipped policy as every command's default ``--checkpoint``, and where to find it.

The policy lives in the repository (``checkpoints/default``), not in the installed package, so the
relative default names it only from the repository's root. A command run from elsewhere (a service's
working directory) with the package installed from a checkout (``pip install -e``, or the checkout
on ``PYTHONPATH``) still finds it beside the package; anywhere else the refusal says what to do.
"""

from __future__ import annotations

from pathlib import Path

from slamorl_jax.run_dirs import path_exists

#: The default ``--checkpoint`` of ``evaluate``, ``recommend`` and ``history build``.
SHIPPED_POLICY = "checkpoints/default"
#: The shipped policy beside the package: present when it is imported from a repository checkout.
CHECKOUT_POLICY = Path(__file__).resolve().parent.parent / SHIPPED_POLICY


def resolve_checkpoint(flag: str, path: str) -> str:
    """``path`` when it exists; the checkout's shipped policy when ``path`` is the default and the
    working directory has none; else ``ValueError`` with one line naming ``flag`` (an empty value,
    a missing path, and for the default where the shipped policy is)."""
    if path == "":
        raise ValueError(f"{flag} is empty: name a policy checkpoint folder")
    if path_exists(path):
        return path
    if Path(path) != Path(SHIPPED_POLICY):
        raise ValueError(f"{flag} {path!r} does not exist")
    if CHECKOUT_POLICY.exists():
        return str(CHECKOUT_POLICY)
    raise ValueError(
        f"{flag} {path!r} does not exist here: the shipped policy is in the repository, not in the "
        "installed package; run from the repository's root or pass --checkpoint=PATH"
    )
