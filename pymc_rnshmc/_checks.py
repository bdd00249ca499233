"""Checks of user settings that name the offending parameter in their error."""

from __future__ import annotations

import numbers

import numpy as np

__all__ = [
    "check_non_negative_integer",
    "check_positive_integer",
    "check_positive_number",
    "check_probability",
]


def check_positive_integer(name: str, value, allow_none: bool = False) -> int | None:
    """``value`` as an ``int`` if it is a positive whole number (``None`` if allowed)."""
    if value is None and allow_none:
        return None
    whole = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if not whole and isinstance(value, numbers.Real) and np.isfinite(value):
        whole = float(value).is_integer()
    if not whole or value < 1:
        allowed = "a positive integer or None" if allow_none else "a positive integer"
        raise ValueError(f"{name} must be {allowed}, got {value!r}.")
    return int(value)


def check_positive_number(name: str, value, allow_none: bool = False) -> float | None:
    """``value`` as a ``float`` if it is finite and positive (``None`` if allowed)."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value):
        valid = False
    else:
        valid = value > 0
    if not valid:
        allowed = "a positive number or None" if allow_none else "a positive number"
        raise ValueError(f"{name} must be {allowed}, got {value!r}.")
    return float(value)


def check_non_negative_integer(name: str, value) -> int:
    """``value`` if it is an ``int`` (not a ``bool``) of at least 0."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}.")
    return int(value)


def check_flag(name: str, value) -> bool:
    """``value`` if it is a bool (numpy's included), else ``ValueError`` naming ``name``."""
    if not isinstance(value, bool | np.bool_):
        raise ValueError(f"{name} must be True or False, got {value!r}.")
    return bool(value)


def check_probability(name: str, value) -> float:
    """``value`` as a ``float`` if it lies strictly between 0 and 1."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < value < 1:
        raise ValueError(f"{name} must be in (0, 1), got {value!r}.")
    return float(value)
