"""Errors and warnings shared by every layer, and the exception groups the step layer catches."""

from __future__ import annotations

import numpy as np

__all__ = ["FIT_ERRORS", "MODEL_ERRORS", "SurrogateFitError", "SurrogateWarning"]


class SurrogateFitError(RuntimeError):
    """The surrogate could not be fitted to the training data."""


class SurrogateWarning(UserWarning):
    """The surrogate could not be used as configured; sampling stays exact."""


MODEL_ERRORS = (ArithmeticError, ValueError, np.linalg.LinAlgError)
"""Numerical errors a model's logp may raise at a bad point: treated as ``logp = -inf``."""

FIT_ERRORS = (SurrogateFitError, np.linalg.LinAlgError, ValueError, FloatingPointError)
"""Errors of a surrogate fit, or of choosing its dynamics: the step falls back, never crashes."""
