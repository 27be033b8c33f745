"""Parameter validation with pydantic: a bad value stops the run before any work.

Every pipeline declares a pydantic model for its ``parameters_<name>.yml`` tree (derived from
:class:`ParamsModel`) and exposes it as ``PARAMETERS`` in its ``pipeline.py``. The project hook
validates it before the first node runs, and nodes call :func:`validate_parameters` to get the
typed object. Errors name the full key, e.g. ``wavetoken.model.d_model``, the bad value and what
was expected.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, TypeVar

import numpy as np
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

M = TypeVar("M", bound=BaseModel)


class ParamsModel(BaseModel):
    """Base for parameter models: unknown keys are errors (typos must not pass silently)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class ParameterError(ValueError):
    """A parameter failed validation; the message lists every bad key with value and expectation."""


def positive_int(value: Any, name: str) -> int:
    """``value`` as an ``int`` if it is a positive integer (Python or NumPy), else a named error."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"{name}: got {value!r}; expected a positive integer")
    return int(value)


def _distinct_seeds(seeds: list[int]) -> list[int]:
    if any(s < 0 for s in seeds) or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct non-negative integers, got {seeds}")
    return seeds


Seeds = Annotated[list[int], Field(min_length=1), AfterValidator(_distinct_seeds)]
"""A field type for a run's seeds: a non-empty list of distinct non-negative integers."""


def _lookup(tree: Any, loc: tuple) -> Any:
    node = tree
    for part in loc:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return "<missing>"
    return node


def validate_parameters(model: type[M], params: Mapping[str, Any] | None, key: str) -> M:
    """Validate ``params`` (the tree under ``key``) against ``model`` or raise ParameterError."""
    if params is None:
        raise ParameterError(f"{key}: no parameters found; expected the tree of {model.__name__}")
    try:
        return model.model_validate(dict(params))
    except ValidationError as err:
        lines = []
        for error in err.errors():
            loc = tuple(error["loc"])
            full_key = ".".join([key, *(str(part) for part in loc)])
            if error["type"] == "missing":
                lines.append(f"{full_key}: missing; {error['msg'].lower()}")
            elif error["type"] == "extra_forbidden":
                lines.append(f"{full_key}: unexpected parameter (not in {model.__name__})")
            else:
                value = error.get("input", _lookup(params, loc))
                if error["type"] == "value_error":
                    # a validator's own reason; a whole tree as input (a model-level check)
                    # would bury it, so only a value that is not a mapping is shown
                    reason = error["msg"].removeprefix("Value error, ")
                    shown = "" if isinstance(value, Mapping) else f"got {_short(value)}; "
                    lines.append(f"{full_key}: {shown}{reason}")
                else:
                    lines.append(f"{full_key}: got {_short(value)}; expected "
                                 f"{error['msg'].lower()}")
        raise ParameterError("invalid parameters\n  " + "\n  ".join(lines)) from None


def _short(value: Any, limit: int = 200) -> str:
    """``repr(value)``, cut to ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."
