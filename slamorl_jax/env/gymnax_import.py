"""Import gymnax without the plotting libraries its bundled environments load for their renderers.

``import gymnax`` imports every bundled environment, and two of them import plotting libraries at
module level for their ``render`` methods only: ``misc/pong.py`` imports seaborn (which brings pandas
and scipy.stats), ``bsuite/catch.py`` and others ``matplotlib.pyplot``. That is about a second of
every process that imports this package's env, for drawings it never makes.

:func:`import_gymnax` imports gymnax with those modules stood in for by :class:`DeferredModule`
placeholders, then takes the placeholders out of ``sys.modules``: an ``import seaborn`` anywhere later
imports the real library as usual, and gymnax's renderers reach it through the placeholder they
hold, which imports it on first use.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
import types
from typing import Any

#: Modules gymnax's environments import only for ``render``.
RENDER_ONLY_MODULES = ("seaborn", "matplotlib.pyplot")


class DeferredModule(types.ModuleType):
    """A stand-in for a module not imported yet: any attribute it lacks imports the real module."""

    def __getattr__(self, attribute: str) -> Any:
        if sys.modules.get(self.__name__) is self:
            del sys.modules[self.__name__]
        return getattr(importlib.import_module(self.__name__), attribute)


def import_gymnax() -> types.ModuleType:
    """``import gymnax``, with :data:`RENDER_ONLY_MODULES` imported only when a renderer uses them."""
    if "gymnax" in sys.modules:
        return sys.modules["gymnax"]
    placed = []
    for name in RENDER_ONLY_MODULES:
        spec = None if name in sys.modules else installed_spec(name)
        if spec is None:
            continue
        placeholder = DeferredModule(name)
        placeholder.__spec__ = spec
        sys.modules[name] = placeholder
        placed.append(name)
    try:
        return importlib.import_module("gymnax")
    finally:
        for name in placed:
            if isinstance(sys.modules.get(name), DeferredModule):
                del sys.modules[name]


def installed_spec(name: str) -> importlib.machinery.ModuleSpec | None:
    """The spec of module ``name`` if it is installed, else ``None`` (imports its parent packages)."""
    try:
        return importlib.util.find_spec(name)
    except ModuleNotFoundError:
        return None
