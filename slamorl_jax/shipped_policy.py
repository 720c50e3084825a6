"""The shipped policy as every command's default ``--checkpoint``, and where to find it.

The policy lives in the repository (``checkpoints/default``), so the relative default names it from
the repository's root. A command run from elsewhere (a service's working directory) finds it beside
the package when the package is a checkout's (``pip install -e``, or the checkout on
``PYTHONPATH``), and inside the package when it was installed from a wheel or a source
distribution: the build copies it there (``setup.py``). Anywhere else the refusal says what to do.
"""

from __future__ import annotations

from pathlib import Path

from slamorl_jax.run_dirs import path_exists

#: The default ``--checkpoint`` of ``evaluate``, ``recommend`` and ``history build``.
SHIPPED_POLICY = "checkpoints/default"
#: The shipped policy beside the package: present when it is imported from a repository checkout.
CHECKOUT_POLICY = Path(__file__).resolve().parent.parent / SHIPPED_POLICY
#: The build's copy of the shipped policy in an installed package (``setup.py`` puts it there).
INSTALLED_POLICY = Path(__file__).resolve().parent / "shipped" / "default"


def shipped_policy_path() -> Path:
    """Where the shipped policy is, from any working folder: the checkout's ``checkpoints/default``
    beside the package, else the installed package's copy; ``FileNotFoundError`` when neither has it
    (for ``slamorl_jax.load_policy(slamorl_jax.shipped_policy_path())`` in a service)."""
    for shipped in (CHECKOUT_POLICY, INSTALLED_POLICY):
        if shipped.exists():
            return shipped
    raise FileNotFoundError(
        f"neither a checkout ({CHECKOUT_POLICY}) nor the installed package ({INSTALLED_POLICY}) holds "
        "the shipped policy"
    )


def resolve_checkpoint(flag: str, path: str) -> str:
    """``path`` when it exists; for the default when the working directory has none, the checkout's
    shipped policy, else the installed package's copy; else ``ValueError`` with one line naming
    ``flag`` (an empty value, a missing path, and for the default where the shipped policy is)."""
    if path == "":
        raise ValueError(f"{flag} is empty: name a policy checkpoint folder")
    if path_exists(path):
        return path
    if Path(path) != Path(SHIPPED_POLICY):
        raise ValueError(f"{flag} {path!r} does not exist")
    try:
        return str(shipped_policy_path())
    except FileNotFoundError:
        raise ValueError(
            f"{flag} {path!r} does not exist here, and neither a checkout nor the installed package "
            "holds the shipped policy; run from the repository's root or pass --checkpoint=PATH"
        ) from None
