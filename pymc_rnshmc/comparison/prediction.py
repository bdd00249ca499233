"""What a sampling call would take on a model of another cost: its exact evaluations, priced.

A run's exact evaluations are counted by its steps and do not depend on the machine; its seconds
do. :func:`predict_call` splits a run's whole call into its evaluations, priced at the model's
cost when the run was made (an :class:`EvaluationCost`), and the rest: the sampler's own work
(compilation, tree building, fits, surrogate trajectories, bookkeeping). The same counts priced at
another cost, plus the same rest, predict the call on a slower model, such as the expensive
forward model a cheap stand-in was run for, or a solver whose cost is known. It predicts the
seconds to a min(bulk, tail) ESS of 1000 in the same way, from the kept draws' share.

What it assumes, and where it fails:

- the sampler spends the same evaluations at the other cost. NUTS does (its path does not depend
  on time); the surrogate samplers weigh measured seconds while tuning
  (:mod:`~pymc_rnshmc.step_methods.economy`), so on a costlier model they may choose otherwise
  (keep a surrogate that a cheap model gave up, refit more often), and the prediction then holds
  for the choices the measured run made, not for those the costlier run will make;
- the evaluations of a call's chains add up: chains sampled one after another (``cores=1``). With
  chains in parallel processes, the call's evaluations overlap and the prediction overstates it;
- a logp or gradient costs the same wherever it is evaluated (a forward model whose solves slow
  down in the tails breaks this);
- the evaluations are the steps' own counts: a compound step's other steps (a Metropolis step
  for a discrete variable) are not counted, and their seconds stay in the rest; a surrogate
  sampler that evaluated its logps by the joint function (where compiling the logp-only one did
  not pay) is priced as if it had not. A run sampled with ``cores=1`` but pooled chains
  (:class:`~pymc_rnshmc.PooledSurrogate`) that evaluate in parallel workers overlaps its
  evaluations as parallel chains do.

numpy only, but for :meth:`EvaluationCost.of_model`, which times a model's compiled functions
through :class:`~pymc_rnshmc.step_methods.exact_model.ExactModel`, as the surrogate samplers call
them.
"""

from __future__ import annotations

import dataclasses
import numbers
import time
from dataclasses import dataclass

import numpy as np

from pymc_rnshmc.comparison.runs import SamplerRun, evaluations
from pymc_rnshmc.comparison.table import comparison_table

__all__ = ["CallPrediction", "EvaluationCost", "predict_call"]


@dataclass(frozen=True)
class EvaluationCost:
    """Seconds of one exact evaluation of a model: its logp alone, and with its gradient.

    Parameters
    ----------
    logp : float
        Seconds of a logp evaluation without gradient.
    logp_and_gradient : float
        Seconds of a logp evaluated with its gradient (NUTS evaluates these only).

    Examples
    --------
    A forward model that takes 20 ms a solve, adjoint included, on top of what the model measured:

    >>> from pymc_rnshmc.comparison import EvaluationCost
    >>> measured = EvaluationCost(logp=1e-4, logp_and_gradient=2e-4)
    >>> measured.slower_by(0.02)
    EvaluationCost(logp=0.0201, logp_and_gradient=0.0202)
    """

    logp: float
    logp_and_gradient: float

    def __post_init__(self) -> None:
        for name in ("logp", "logp_and_gradient"):
            value = getattr(self, name)
            real = isinstance(value, numbers.Real) and not isinstance(value, bool)
            if not (real and np.isfinite(value) and value >= 0):
                raise ValueError(
                    f"EvaluationCost.{name} must be a finite number >= 0, got {value!r}."
                )

    def slower_by(self, seconds: float) -> EvaluationCost:
        """The cost with ``seconds`` more for each evaluation (a solve, with its adjoint or not)."""
        return EvaluationCost(self.logp + seconds, self.logp_and_gradient + seconds)

    def seconds(self, logps: float, gradients: float) -> float:
        """Seconds of ``logps`` evaluations of which ``gradients`` came with their gradient."""
        return (logps - gradients) * self.logp + gradients * self.logp_and_gradient

    @classmethod
    def of_model(cls, model=None, point: dict | None = None, repeats: int = 30) -> EvaluationCost:
        """Time the model's logp, and logp with gradient, as the surrogate samplers call them.

        The median over ``repeats`` calls of each function, each call at ``point`` (default:
        the model's initial point; a dict of every value variable, transformed ones by their
        transformed names) moved by 1e-5 of each unconstrained coordinate's size (at least
        1e-5), a new move for every call and for each function, so that a model which caches its
        last solve (a factorization, an ODE solution) is not timed on its cache. A first call of
        each, which compiles it, is not timed. A model without a gradient gets its logp's
        seconds for both. A model whose cost varies over the posterior (an ODE whose solver
        takes more steps in the tails) is timed near one point only: pass a typical one. These
        are PyTensor's compiled functions; nutpie compiles its own, whose cost may differ.
        """
        import pymc as pm

        from pymc_rnshmc.step_methods.exact_model import ExactModel, has_gradient

        model = pm.modelcontext(model)
        variables = model.continuous_value_vars
        gradient = has_gradient(model, variables)
        exact = ExactModel(model, variables, initial_point=point, gradient=gradient)
        start = exact.initial_position
        rng = np.random.default_rng(0)
        calls = max(int(repeats), 1) + 1  # the first, untimed, compiles

        def moved() -> np.ndarray:
            steps = 1e-5 * np.maximum(1.0, np.abs(start)) * rng.normal(size=(calls, start.size))
            return exact.cast(start + steps)

        logp = _median_seconds(exact.logp, moved())
        if not gradient:
            return cls(logp, logp)
        return cls(logp, _median_seconds(exact.potential_and_gradient, moved()))


def _median_seconds(function, positions: np.ndarray) -> float:
    """Median seconds of ``function`` over ``positions[1:]``; the first call is not timed."""
    function(positions[0])
    seconds = np.empty(len(positions) - 1)
    for index, position in enumerate(positions[1:]):
        clock = time.perf_counter()
        function(position)
        seconds[index] = time.perf_counter() - clock
    return float(np.median(seconds))


@dataclass(frozen=True)
class CallPrediction:
    """A run's call predicted at another evaluation cost (:func:`predict_call`).

    Attributes
    ----------
    whole_call_seconds : float
        The whole call at the new cost.
    seconds_to_ess_1000 : float
        The whole call until the kept draws reach a min(bulk, tail) ESS of 1000 (the tuning as
        it was, the kept draws scaled), at the new cost.
    evaluation_seconds : float
        The part of ``whole_call_seconds`` spent in exact evaluations.
    sampler_seconds : float
        The rest, as measured: the sampler's own work, unchanged by the model's cost.
    """

    whole_call_seconds: float
    seconds_to_ess_1000: float
    evaluation_seconds: float
    sampler_seconds: float


def predict_call(
    run: SamplerRun, cost: EvaluationCost, measured_at: EvaluationCost
) -> CallPrediction:
    """The whole call of ``run`` as it would be with each evaluation costing ``cost``.

    Parameters
    ----------
    run : SamplerRun
        From :func:`~pymc_rnshmc.comparison.run_sampler` (which counts the tuning's evaluations
        before it drops the tuning draws), with chains sampled one after another.
    cost : EvaluationCost
        The cost to predict the call at.
    measured_at : EvaluationCost
        The model's cost when ``run`` was made (:meth:`EvaluationCost.of_model`).

    Returns
    -------
    CallPrediction

    Raises
    ------
    ValueError
        The run's steps did not count their evaluations, or its tuning's are not known (a run
        not made by ``run_sampler``, or with no tuning draws); or the counted evaluations at
        ``measured_at`` would take longer than the run did.

    Examples
    --------
    >>> import pymc as pm
    >>> from pymc_rnshmc import RNSHMC, run_sampler
    >>> from pymc_rnshmc.comparison import EvaluationCost, predict_call
    >>> with pm.Model():
    ...     x = pm.Normal("x", 1, 2, shape=2)
    ...     run = run_sampler(RNSHMC(weigh_costs=False), tune=300, draws=200, chains=1,
    ...                       progressbar=False)
    ...     measured = EvaluationCost.of_model()
    >>> slow = predict_call(run, measured.slower_by(0.01), measured)  # a 10 ms solve
    >>> bool(slow.whole_call_seconds > run.whole_call_seconds + 0.01 * 200)
    True
    """
    kept_logps, kept_gradients = (
        float(np.sum(counts)) for counts in evaluations(run.trace.sample_stats, run.backend)
    )
    tuning_logps, tuning_gradients = run.tuning_evaluations
    counts = [kept_logps, kept_gradients, tuning_logps, tuning_gradients]
    if not np.all(np.isfinite(counts)):
        raise ValueError(
            f"The run {run.name!r} has no count of its exact evaluations (its steps report none, "
            "or its tuning draws were dropped before they were counted): make it with "
            "run_sampler."
        )
    logps, gradients = kept_logps + tuning_logps, kept_gradients + tuning_gradients
    sampler_seconds = run.whole_call_seconds - measured_at.seconds(logps, gradients)
    kept_sampler_seconds = run.draw_seconds - measured_at.seconds(kept_logps, kept_gradients)
    if sampler_seconds < 0 or kept_sampler_seconds < 0:
        raise ValueError(
            f"The run {run.name!r} took less time than its counted evaluations at the measured "
            f"cost would (whole call {run.whole_call_seconds:.3g} s against "
            f"{measured_at.seconds(logps, gradients):.3g} s; kept draws "
            f"{run.draw_seconds:.3g} s against "
            f"{measured_at.seconds(kept_logps, kept_gradients):.3g} s): the cost overstates the "
            "model's when the run was made, or its chains ran in parallel. Measure the cost on "
            "the model the run sampled, with chains sampled one after another (cores=1)."
        )
    evaluation_seconds = cost.seconds(logps, gradients)
    whole_call = sampler_seconds + evaluation_seconds
    kept = kept_sampler_seconds + cost.seconds(kept_logps, kept_gradients)
    repriced = dataclasses.replace(run, whole_call_seconds=whole_call, draw_seconds=kept)
    to_ess = comparison_table({run.name: repriced}).loc[run.name, "s to ESS 1000"]
    return CallPrediction(
        whole_call_seconds=float(whole_call),
        seconds_to_ess_1000=float(to_ess),
        evaluation_seconds=float(evaluation_seconds),
        sampler_seconds=float(sampler_seconds),
    )
