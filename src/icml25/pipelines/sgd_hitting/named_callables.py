"""User-defined pieces named in conf as ``"module:attr"`` (a landscape factory, a noise law, a
state-dependent noise scale σ(x)): imported on demand, with an error naming the key."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def load_callable(name: str, what: str) -> Callable[..., Any]:
    """The object ``attr`` (dots allowed) of module ``module`` for ``name = "module:attr"``.

    ``what`` names the configuration key in the error (e.g. ``landscapes.l6.factory``)."""
    if not isinstance(name, str) or name.count(":") != 1:
        raise ValueError(f"{what}: {name!r} must name a Python callable as 'module:attr'")
    module_name, attr = name.split(":")
    if not module_name or not attr:
        raise ValueError(f"{what}: {name!r} must name a Python callable as 'module:attr'")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as err:
        raise ValueError(f"{what}: cannot import module {module_name!r} of {name!r} "
                         f"({type(err).__name__}: {err})") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"{what}: module {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ValueError(f"{what}: {name!r} is not callable")
    return obj
