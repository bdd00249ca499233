"""Choosing and checking the variables a surrogate HMC step samples."""

from __future__ import annotations

from pymc.util import get_value_vars_from_user_vars
from pymc.vartypes import continuous_types

__all__ = ["continuous_value_vars"]


def continuous_value_vars(vars, model, step_name: str) -> list:
    """The value variables a step should own, in the model's order.

    ``vars=None`` means every continuous variable of the model. Random variables are
    converted to their value variables. The result follows ``model.value_vars`` order:
    PyMC ravels points in that order when a step shares no extra variables, so any other
    order would silently mix up coordinates.

    Raises
    ------
    ValueError
        If a requested variable is discrete, or if there is no continuous variable.
    """
    if vars is None:
        chosen = list(model.continuous_value_vars)
        if not chosen:
            discrete = ", ".join(v.name for v in model.value_vars) or "none"
            raise ValueError(
                f"{step_name} samples continuous variables, and this model has none "
                f"(its free variables: {discrete}). Use pm.sample() without step=, which "
                "assigns samplers for discrete variables."
            )
    else:
        if not isinstance(vars, list | tuple):
            vars = [vars]
        chosen = get_value_vars_from_user_vars(vars, model)
        discrete = [v for v in chosen if v.dtype not in continuous_types]
        if discrete:
            names = ", ".join(f"{v.name!r} ({v.dtype})" for v in discrete)
            raise ValueError(
                f"{step_name} can only sample continuous variables, but was given {names}. "
                "Leave discrete variables out of `vars`; pm.sample assigns them a suitable "
                f"step, e.g. pm.sample(step=[{step_name}(vars=[...continuous...])])."
            )
    wanted = set(chosen)
    return [v for v in model.value_vars if v in wanted]
