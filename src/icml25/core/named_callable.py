"""A Python callable named in conf as ``"module:attr"`` (dots allowed in ``attr``): a user's
target function, noise law or landscape factory, imported on demand, with errors naming the
configuration key."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def load_callable(ref: str, key: str) -> Callable[..., Any]:
    """The object ``attr`` of module ``module`` for ``ref = "module:attr"``; a ``ValueError``
    naming ``key`` when ``ref`` is malformed, the module does not import, the attribute is
    missing or the object is not callable."""
    if not isinstance(ref, str) or ref.count(":") != 1 or not all(ref.split(":")):
        raise ValueError(f"{key}: {ref!r} is not a callable reference of the form 'module:attr'")
    module, attr = ref.split(":")
    try:
        obj: Any = importlib.import_module(module)
    except ImportError as err:
        raise ValueError(f"{key}: cannot import module {module!r} of {ref!r} "
                         f"({type(err).__name__}: {err})") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"{key}: module {module!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ValueError(f"{key}: {ref!r} is not callable")
    return obj
