"""The user's coarse model as a potential on the sampler's coordinates.

:class:`~pymc_rnshmc.surrogates.coarse.CoarseCorrectedSurrogate` needs ``q -> (U_c, grad U_c)``
on the step's raveled vector. This module builds it from what the user gives: a PyMC model
with the same free variables (same names, shapes and transforms, so the same value variables),
whose joint logp-and-gradient function is compiled once; or a callable on the raveled vector
returning ``(logp, grad logp)``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pymc as pm

from pymc_rnshmc.step_methods.exact_model import has_gradient
from pymc_rnshmc.surrogates.coarse import CoarseCorrectedSurrogate
from pymc_rnshmc.surrogates.network.random_network import RandomNetworkSurrogate

__all__ = ["CallablePotential", "CoarseModelPotential", "coarse_corrected", "coarse_potential"]


class CoarseModelPotential:
    """``q -> (-logp, -grad logp)`` of a compiled PyMC model (picklable with the step)."""

    def __init__(self, function) -> None:
        function._pytensor_function.trust_input = True
        self._function = function
        self.dtype = str(function.dtype)

    def __call__(self, position: np.ndarray) -> tuple[float, np.ndarray]:
        """The coarse ``U`` and ``grad U`` at one point."""
        position = np.ascontiguousarray(position, dtype=self.dtype)
        logp, gradient = self._function._pytensor_function(position)
        return -float(logp), -np.asarray(gradient, dtype=float)


class CallablePotential:
    """``q -> (-logp, -grad logp)`` of the user's callable ``q -> (logp, grad logp)``."""

    def __init__(self, function: Callable) -> None:
        self._function = function

    def __call__(self, position: np.ndarray) -> tuple[float, np.ndarray]:
        """The coarse ``U`` and ``grad U`` at one point."""
        logp, gradient = self._function(position)
        return -float(logp), -np.asarray(gradient, dtype=float)


def coarse_corrected(
    surrogate, coarse, vars, initial_point: dict, dtype: str, step_name: str
) -> CoarseCorrectedSurrogate:
    """The step's random network as the correction of the user's coarse model.

    Raises
    ------
    ValueError
        ``surrogate`` is not a random network (only its fits report the held-out errors the
        comparison needs), or :func:`coarse_potential` refuses ``coarse``.
    """
    if not isinstance(surrogate, RandomNetworkSurrogate):
        raise ValueError(
            f"{step_name}(coarse=...) fits a random network to the coarse model's error; "
            f"surrogate= must then be a RandomNetworkSurrogate (or not given), got "
            f"{type(surrogate).__name__}."
        )
    potential = coarse_potential(coarse, vars, initial_point, dtype, step_name)
    return CoarseCorrectedSurrogate(potential, correction=surrogate)


def coarse_potential(coarse, vars, initial_point: dict, dtype: str, step_name: str):
    """The coarse potential of ``coarse`` on the raveled vector of the step's ``vars``.

    Parameters
    ----------
    coarse : pymc.Model or callable
        A model with the same free variables as the step samples, or ``q -> (logp, grad logp)``
        on the step's raveled vector.
    vars : list
        The step's value variables, in raveling order.
    initial_point : dict
        The fine model's initial point (shapes, and where a callable is checked once).
    dtype : str
        The step's floating-point type.
    step_name : str
        For messages.

    Raises
    ------
    ValueError
        The coarse model's free variables differ from the step's, or its logp has no gradient;
        or a callable's answer at the initial point does not have the right shapes.
    TypeError
        ``coarse`` is neither a model nor callable.
    """
    if isinstance(coarse, pm.Model):
        return _compiled(coarse, vars, initial_point, dtype, step_name)
    if not callable(coarse):
        raise TypeError(
            f"{step_name}(coarse=...) takes a pymc.Model with the same free variables, or a "
            f"callable q -> (logp, grad logp) on the sampler's raveled vector; got {coarse!r}."
        )
    potential = CallablePotential(coarse)
    _check_callable(potential, vars, initial_point, step_name)
    return potential


def _compiled(coarse: pm.Model, vars, initial_point: dict, dtype: str, step_name: str):
    names = [v.name for v in vars]
    by_name = {v.name: v for v in coarse.value_vars}
    missing = [name for name in names if name not in by_name]
    extra = [name for name in by_name if name not in names]
    if missing or extra:
        raise ValueError(
            f"{step_name}(coarse=...): the coarse model must have the free variables the step "
            f"samples, with the same names and transforms. The step samples {names}; the "
            f"coarse model's are {list(by_name)}."
        )
    coarse_point = coarse.initial_point()
    for name in names:
        if np.shape(coarse_point[name]) != np.shape(initial_point[name]):
            raise ValueError(
                f"{step_name}(coarse=...): {name!r} has shape {np.shape(coarse_point[name])} in "
                f"the coarse model and {np.shape(initial_point[name])} in the model sampled."
            )
    coarse_vars = [by_name[name] for name in names]
    if not has_gradient(coarse, coarse_vars):
        raise ValueError(
            f"{step_name}(coarse=...): the coarse model's logp has no gradient, and the "
            "surrogate trajectories follow the coarse model's gradient. Give it one (an Op with "
            "a gradient), or sample without coarse=."
        )
    function = coarse.logp_dlogp_function(
        coarse_vars, dtype=dtype, ravel_inputs=True, initial_point=coarse_point
    )
    return CoarseModelPotential(function)


def _check_callable(potential: CallablePotential, vars, initial_point: dict, step_name: str):
    start = np.concatenate([np.ravel(initial_point[v.name]) for v in vars]).astype(float)
    try:
        _, gradient = potential(start)
    except (TypeError, ValueError) as error:
        raise ValueError(
            f"{step_name}(coarse=...): the callable must return (logp, grad logp) at a point of "
            f"the sampler's raveled vector ({start.size} values); at the initial point it "
            f"raised {error!r}."
        ) from error
    if np.shape(gradient) != start.shape:
        raise ValueError(
            f"{step_name}(coarse=...): the callable's gradient has shape {np.shape(gradient)}; "
            f"the sampler's raveled vector has {start.size} values."
        )
