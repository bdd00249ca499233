"""The options every surrogate sampler shares: checked once, then kept as one value.

An invalid option raises at construction, naming the option and the sampler; the warm-up gets
the checked options with what the step learns from the model
(:class:`~pymc_rnshmc.step_methods.warmup.WarmupSettings`).
"""

from __future__ import annotations

import inspect
from typing import NamedTuple

import pytensor
from pymc.step_methods.arraystep import GradientSharedStep
from pymc.step_methods.hmc.base_hmc import BaseHMC
from pymc.step_methods.hmc.nuts import NUTS

from pymc_rnshmc._checks import (
    check_flag,
    check_positive_integer,
    check_positive_number,
    check_probability,
)
from pymc_rnshmc.step_methods.dynamics import Dynamics, get_dynamics
from pymc_rnshmc.step_methods.schedule import ExplorationSchedule
from pymc_rnshmc.step_methods.warmup import WarmupSettings

__all__ = [
    "StepOptions",
    "check_nuts_options",
    "check_options",
    "compile_options",
    "nuts_option",
]

_NUTS_PARAMETERS = {
    **inspect.signature(BaseHMC.__init__).parameters,
    **inspect.signature(NUTS.__init__).parameters,
}
_COMPILE_PARAMETERS = {
    **inspect.signature(GradientSharedStep.__init__).parameters,
    **inspect.signature(pytensor.function).parameters,
}
"""Taken by PyMC's gradient step beneath NUTS, or passed on to ``pytensor.function``."""
_NOT_OPTIONS = {
    "self",
    "vars",
    "inputs",
    "outputs",
    "pytensor_kwargs",
    "kwargs",
    "model",
    "logp_dlogp_func",
}


class StepOptions(NamedTuple):
    """A surrogate sampler's checked options (see :class:`~pymc_rnshmc.RNSHMC`)."""

    dynamics: Dynamics
    path_length: float | None
    surrogate_target_accept: float
    exploration_steps: int | None
    training_window: int | None
    max_steps: int
    start_error: float | None
    time_limit: float | None
    refit_during_tuning: bool
    weigh_costs: bool
    tune_on_surrogate: bool
    explore_from_mode: bool

    def warmup_settings(
        self,
        name: str,
        schedule: ExplorationSchedule,
        *,
        dim: int,
        values_only: bool,
        exact_sampler: str,
        nuts_options: dict,
    ) -> WarmupSettings:
        """The warm-up's settings for a model of ``dim`` parameters.

        A values-only model never postpones its start: postponing wasted the tuning that
        learning from surrogate proposals uses better (pharmacokinetic ODE: started at draw 675
        with 23 % held-out error, no refit left, acceptance 0.3, then a collapse).
        """
        return WarmupSettings(
            name=name,
            exact_sampler=exact_sampler,
            schedule=schedule,
            dynamics=self.dynamics,
            dim=dim,
            values_only=values_only,
            learns=self.refit_during_tuning and schedule.learns_during_tuning,
            exploration_steps=self.exploration_steps,
            training_window=self.training_window,
            path_length=self.path_length,
            start_error=None if values_only else self.start_error,
            surrogate_target_accept=self.surrogate_target_accept,
            max_steps=self.max_steps,
            max_depth=nuts_option(nuts_options, "max_treedepth"),
            max_energy_change=nuts_option(nuts_options, "Emax"),
            weighs_costs=self.weigh_costs,
            tunes_on_surrogate=self.tune_on_surrogate,
        )


def check_options(
    sampler: str,
    surrogate,
    *,
    dynamics: str,
    path_length: float | None,
    target_accept: float,
    surrogate_target_accept: float | None,
    exploration_steps: int | None,
    training_window: int | None,
    max_steps: int,
    start_error: float | None,
    time_limit: float | None,
    refit_during_tuning: bool,
    weigh_costs: bool = True,
    tune_on_surrogate: bool = True,
    explore_from_mode: bool = True,
) -> StepOptions:
    """Check a sampler's options and keep them; an invalid one raises, naming it."""
    chosen = get_dynamics(dynamics)
    chosen.check(surrogate, sampler)
    if path_length is not None and not chosen.chooses_path_length:
        raise ValueError(
            f"path_length applies to dynamics='hmc' only; dynamics={dynamics!r} chooses each "
            "trajectory's length by its own criterion."
        )
    check_probability("target_accept", target_accept)
    if surrogate_target_accept is None:
        surrogate_target_accept = chosen.target_accept
    return StepOptions(
        dynamics=chosen,
        path_length=check_positive_number("path_length", path_length, allow_none=True),
        surrogate_target_accept=check_probability(
            "surrogate_target_accept", surrogate_target_accept
        ),
        exploration_steps=check_positive_integer(
            "exploration_steps", exploration_steps, allow_none=True
        ),
        training_window=check_positive_integer("training_window", training_window, allow_none=True),
        max_steps=check_positive_integer("max_steps", max_steps),
        start_error=check_positive_number("start_error", start_error, allow_none=True),
        time_limit=check_positive_number("time_limit", time_limit, allow_none=True),
        refit_during_tuning=check_flag("refit_during_tuning", refit_during_tuning),
        weigh_costs=check_flag("weigh_costs", weigh_costs),
        tune_on_surrogate=check_flag("tune_on_surrogate", tune_on_surrogate),
        explore_from_mode=check_flag("explore_from_mode", explore_from_mode),
    )


def check_nuts_options(sampler: str, options: dict) -> None:
    """Raise ``TypeError`` naming ``sampler`` for a keyword neither it nor PyMC's NUTS takes."""
    known = set(_NUTS_PARAMETERS) | set(_COMPILE_PARAMETERS)
    known -= _NOT_OPTIONS
    unknown = sorted(set(options) - known)
    if unknown:
        raise TypeError(
            f"{sampler}() got unexpected keyword argument(s) {', '.join(map(repr, unknown))}. "
            f"It takes its own options (see help({sampler})) and passes the rest to pymc.NUTS "
            f"for its exact draws, which takes: {', '.join(sorted(known))}."
        )


def compile_options(options: dict) -> dict:
    """The options that go to the compilation of the model's logp function."""
    chosen = dict(options.get("compile_kwargs") or {})
    chosen.update(
        {
            name: value
            for name, value in options.items()
            if name in _COMPILE_PARAMETERS
            and name not in _NUTS_PARAMETERS
            and name not in _NOT_OPTIONS | {"compile_kwargs"}
        }
    )
    return chosen


def nuts_option(options: dict, name: str):
    """The value of PyMC's NUTS option ``name``: the given one, or NUTS's default."""
    if name in options:
        return options[name]
    return _NUTS_PARAMETERS[name].default
