"""What happens where the model's logp fails: a counted rejection, or a clear error.

A forward model can fail at some parameters: an ODE solver that gives up, a factorization of a
matrix that is not positive definite, a simulator that raises. At such a point the sampler
either rejects the proposal and counts it (stat ``model_failures``), as PyMC's NUTS counts a
divergence, or stops with a :class:`~pymc_rnshmc.exceptions.ModelEvaluationError` that names the
parameters.

* A logp that is NaN or infinite is a rejection: the density there is taken as zero. The first
  NaN or ``+inf`` in a chain is told once; ``-inf`` (a density of zero) is only counted.
* ``numpy.linalg.LinAlgError``, and scipy's ``ValueError`` for arrays with infs or NaNs, are
  rejections too, as in PyMC's own leapfrog (which turns them into divergences).
* Any other error stops sampling with the parameters in the message, unless its type is listed
  in the step's ``reject_errors``. Listing a type makes the sampler target the posterior
  truncated to where the model succeeds, which is only the posterior the user wants if the
  model cannot be evaluated there by design.
* A served model that does not answer (:class:`~pymc_rnshmc.exceptions.ServedModelUnavailable`:
  refused connections, no answer within the client's timeout) stops sampling, keeping the draws
  so far, whatever ``reject_errors`` lists: it is no answer about the posterior. (A step's
  ``time_limit`` shorter than the client's timeout abandons the request first: a rejection.)
* With a ``time_limit``, an evaluation that runs past it
  (:class:`~pymc_rnshmc.exceptions.EvaluationTimeout`, raised by
  :mod:`~pymc_rnshmc.step_methods.time_limit`) is a rejection too, told once like a NaN. The
  sampler then targets the posterior truncated to where the model finishes in time.

:class:`ModelFailures` holds that policy and the count; the exact model and the guard around
PyMC's leapfrog share one instance, so every phase (exploration, the fit's evaluations,
surrogate draws) counts in the same place.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from pymc.step_methods.hmc.integration import IntegrationError

from pymc_rnshmc.exceptions import (
    EvaluationTimeout,
    ModelEvaluationError,
    ServedModelUnavailable,
)

__all__ = [
    "GuardedLogpGradient",
    "ModelFailures",
    "ParameterLayout",
    "check_reject_errors",
]

SCIPY_NONFINITE = "array must not contain infs or nans"
"""scipy.linalg's message for non-finite input; PyMC's leapfrog treats it as a divergence."""

SHOWN_ELEMENTS = 6
"""Elements of a vector variable shown in a message."""


def check_reject_errors(value) -> tuple[type[Exception], ...]:
    """``reject_errors`` as a tuple of exception types, or a clear error."""
    if value is None:
        return ()
    if isinstance(value, str):
        raise TypeError(
            f"reject_errors must list exception types, not their names: got {value!r}; pass "
            "the classes themselves, e.g. reject_errors=(ValueError, RuntimeError)."
        )
    types = (value,) if isinstance(value, type) else tuple(value)
    for kind in types:
        if not (isinstance(kind, type) and issubclass(kind, Exception)):
            raise TypeError(
                f"reject_errors must list exception types (subclasses of Exception), got "
                f"{kind!r}. KeyboardInterrupt and SystemExit cannot be rejected: interrupting "
                "pm.sample returns the draws so far."
            )
    return types


@dataclass(frozen=True)
class ParameterLayout:
    """Names and shapes of the value variables along the sampler's raveled vector."""

    names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]

    @classmethod
    def of(cls, vars, initial_point: dict) -> ParameterLayout:
        names = tuple(var.name for var in vars)
        return cls(names, tuple(np.shape(initial_point[name]) for name in names))

    def _slices(self):
        start = 0
        for name, shape in zip(self.names, self.shapes, strict=True):
            size = math.prod(shape)
            yield name, shape, slice(start, start + size)
            start += size

    def parameters(self, position: np.ndarray) -> dict[str, np.ndarray]:
        """``{name: value}`` at a raveled position."""
        position = np.asarray(position, dtype=float)
        return {name: position[part].reshape(shape) for name, shape, part in self._slices()}

    def unravel_rows(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        """``{name: (n, *shape)}`` from raveled rows ``(n, d)``."""
        rows = np.asarray(rows, dtype=float).reshape(len(rows), -1)
        return {
            name: rows[:, part].reshape(len(rows), *shape) for name, shape, part in self._slices()
        }

    def describe(self, position: np.ndarray) -> str:
        """``"mu = 0.31, theta = [0.1, -0.2, ...]"``, short enough for a message."""
        parts = []
        for name, value in self.parameters(position).items():
            flat = value.ravel()
            shown = ", ".join(f"{x:.4g}" for x in flat[:SHOWN_ELEMENTS])
            if value.ndim == 0:
                parts.append(f"{name} = {shown}")
            else:
                more = ", ..." if flat.size > SHOWN_ELEMENTS else ""
                parts.append(f"{name} = [{shown}{more}]")
        return ", ".join(parts)


class ModelFailures:
    """The rejection policy for a failing model, and the count of failures so far.

    Parameters
    ----------
    layout : ParameterLayout
        To name the parameters in messages.
    reject_errors : tuple of exception types
        Errors of the model treated as rejections besides the ones PyMC's leapfrog rejects.
    """

    def __init__(self, layout: ParameterLayout, reject_errors: tuple = ()) -> None:
        self.layout = layout
        self.reject_errors = check_reject_errors(reject_errors)
        self.count = 0
        self.first: str | None = None

    def rejects(self, error: Exception) -> bool:
        """Whether ``error`` makes a counted rejection rather than a stop.

        A served model that does not answer is never rejected, whatever ``reject_errors``
        lists (``ConnectionError``, ``Exception``): its silence says nothing about the posterior.
        """
        if isinstance(error, ServedModelUnavailable):
            return False
        if isinstance(error, (np.linalg.LinAlgError, *self.reject_errors)):
            return True
        return isinstance(error, ValueError) and SCIPY_NONFINITE in str(error).lower()

    def raised(self, position: np.ndarray, error: Exception) -> None:
        """Count a rejected ``error`` at ``position``, or raise a ModelEvaluationError."""
        if self.rejects(error):
            timed_out = isinstance(error, EvaluationTimeout)
            self.note(position, str(error) if timed_out else f"raised {type(error).__name__}")
            return
        where = self.layout.describe(position)
        if isinstance(error, ServedModelUnavailable):
            raise ModelEvaluationError(
                f"The served model did not answer at {where}: {_first_line(error)}",
                "",
                self.layout.parameters(position),
            ) from error
        listed = f"reject_errors=({type(error).__name__},)"
        raise ModelEvaluationError(
            f"The model's logp raised {type(error).__name__}: {_first_line(error)} at {where}",
            f"Check the model there with model.point_logps(). If it cannot be evaluated there "
            f"by design, pass {listed} to the step: such points are then rejected and counted "
            "in the sample stat model_failures, and the sampler targets the posterior truncated "
            "to where the model succeeds.",
            self.layout.parameters(position),
        ) from error

    def note(self, position: np.ndarray, reason: str, tell: bool = True) -> None:
        """Count a failure; remember the first since the last :meth:`take` that is to be told.

        ``tell=False`` counts without telling: a ``logp`` of ``-inf`` is a density of zero (an
        overflow far out in a tail, a support constraint), rejected like any failure but not
        worth a message.
        """
        self.count += 1
        if tell and self.first is None:
            self.first = f"{reason} at {self.layout.describe(position)}"

    def note_logp(self, position: np.ndarray, logp: float) -> None:
        """Count a logp that is not finite; tell of NaN and ``+inf``, not of ``-inf``."""
        self.note(position, f"logp = {logp}", tell=logp != -math.inf)

    def add(self, count: int, first: str | None) -> None:
        """Count failures taken elsewhere (a worker's evaluation), keeping the first message."""
        self.count += count
        if self.first is None:
            self.first = first

    def take(self) -> tuple[int, str | None]:
        """The failures since the last call, and the first of them; starts counting afresh."""
        taken = (self.count, self.first)
        self.count, self.first = 0, None
        return taken


class GuardedLogpGradient:
    """PyMC's leapfrog logp-and-gradient function, failing as :class:`ModelFailures` says.

    A rejected error becomes PyMC's ``IntegrationError``, which its NUTS counts as a divergence;
    a non-finite logp is counted and left to NUTS (an infinite energy error, a divergence).
    """

    def __init__(self, function: Callable, failures: ModelFailures) -> None:
        self.function = function
        self.failures = failures

    def __call__(self, position: np.ndarray, point_map_info):
        try:
            logp, gradient = self.function(position, point_map_info)
        except Exception as error:
            self.failures.raised(position, error)
            raise IntegrationError(f"The model raised {type(error).__name__}.") from error
        if not math.isfinite(logp):
            self.failures.note_logp(position, float(logp))
        return logp, gradient


def _first_line(error: Exception) -> str:
    text = str(error).strip().splitlines()
    return repr(text[0]) if text else "(no message)"
