"""``pymc_rnshmc.sample``: ``pm.sample`` for pooled chains that share one surrogate.

The chains run in this process as one :class:`~pymc_rnshmc.step_methods.population.PooledSurrogate`
population step; their exact evaluations run where its evaluator sends them. What this adds to
``pm.sample``: ``cores`` is the number of local worker processes for the exact evaluations
(used where the model's cost pays for them:
:class:`~pymc_rnshmc.step_methods.local_evaluator.LocalEvaluator`), PyMC's advice to raise it
is dropped, and an interrupt after tuning returns the draws made so far.
"""

from __future__ import annotations

import contextlib
import logging
import os
import warnings

from pymc.backends.base import MultiTrace
from pymc.model import modelcontext

from pymc_rnshmc._checks import check_positive_integer
from pymc_rnshmc.step_methods.evaluators import Evaluator
from pymc_rnshmc.step_methods.local_evaluator import LocalEvaluator
from pymc_rnshmc.step_methods.population import PooledSurrogate

__all__ = ["sample"]


def sample(
    draws: int = 1000,
    *,
    tune: int = 1000,
    chains: int | None = 4,
    step=None,
    model=None,
    random_seed=None,
    progressbar: bool = True,
    cores: int | None = None,
    mp_ctx: str | None = None,
    evaluator: Evaluator | None = None,
    share_exploration: bool = False,
    **kwargs,
):
    """Sample ``chains`` chains of one surrogate sampler that share their surrogate.

    As ``pm.sample`` (same arguments, same returned InferenceData or DataTree, the samplers'
    statistics), with the chains in this process: one warm-up fitted on the exact evaluations
    of all chains, each round's exact evaluations of all chains given to ``evaluator``
    together. With worker processes or Dask, while the chains explore and after tuning, each
    chain's next draw is sent as soon as its last is back, whatever the others are doing.

    Parameters
    ----------
    draws, tune, chains, random_seed, progressbar
        As for ``pm.sample``.
    step : SurrogateHMC, optional
        The configured sampler whose chains are pooled; default ``RNSHMC()``.
    model : pymc.Model, optional
        Default the model in context.
    cores : int, optional
        Local worker processes for the exact evaluations, as ``pm.sample``'s ``cores``
        (default ``min(4, CPUs)``), and at most one per chain. They are used where the model's
        exact evaluation, measured at the initial point, costs enough for them to pay;
        otherwise, and with ``cores=1``, the evaluations run in this process. The log says
        which, and why. The draws are the same either way, with ``weigh_costs=False``; with
        the default, up to the timing noise of the cost-weighing choices.
    mp_ctx : str or multiprocessing context, optional
        The workers' start method, as for ``pm.sample``; default PyMC's (``"fork"`` on Linux
        up to Python 3.13). With ``"spawn"`` or ``"forkserver"`` (Windows, Intel Macs, Linux
        from Python 3.14), call ``sample`` under ``if __name__ == "__main__":`` in a script,
        as ``pm.sample(cores=n)`` needs there.
    evaluator : Evaluator, optional
        Where each round's exact evaluations run instead (``DaskEvaluator`` for a cluster);
        then ``mp_ctx``, and ``cores`` other than 1, must not be given.
    share_exploration : bool
        Let the chains share the exploration before the first fit (:class:`PooledSurrogate`).
    **kwargs
        Passed on to ``pm.sample``, which steps the pooled chains in this process.

    Returns
    -------
    InferenceData or DataTree
        What ``pm.sample`` returns. Interrupted (Ctrl-C) after tuning, the draws made so far
        (the posterior group only, with a warning); PyMC itself would lose them.

    Raises
    ------
    ModelEvaluationError
        The model failed where the failing-model policy stops, or a served model stopped
        answering; the chains' draws so far are in its ``draws``, ``(chain, draw, ...)``.

    Examples
    --------
    >>> import pymc as pm
    >>> from pymc_rnshmc import RNSHMC, sample
    >>> with pm.Model():
    ...     x = pm.Normal("x", 1, 2, shape=2)
    ...     step = RNSHMC(exploration_steps=100, weigh_costs=False)
    ...     idata = sample(
    ...         draws=200, tune=300, chains=2, step=step, random_seed=1, progressbar=False,
    ...         compute_convergence_checks=False,
    ...     )
    >>> idata.posterior["x"].shape
    (2, 200, 2)
    >>> bool(abs(idata.posterior["x"].mean() - 1.0) < 0.3)
    True
    """
    import pymc as pm

    from pymc_rnshmc.step_methods.rnshmc import RNSHMC

    model = modelcontext(model)
    own = evaluator is None
    if own:
        cores = min(4, os.cpu_count() or 1) if cores is None else cores
        cores = check_positive_integer("cores", cores)
        chains = max(2, cores) if chains is None else chains
        evaluator = LocalEvaluator(
            min(cores, chains), evaluations=max(chains * (draws + tune), 1), context=_name(mp_ctx)
        )
    elif cores not in (None, 1) or mp_ctx is not None:
        raise ValueError(
            "Give sample() either an evaluator or cores/mp_ctx (its local worker processes), "
            "not both: the evaluator decides where the exact evaluations run."
        )
    with model, _without_pymcs_cores_advice():
        sampler = RNSHMC() if step is None else step
        pooled = PooledSurrogate(sampler, evaluator=evaluator, share_exploration=share_exploration)
        pooled._draws_from_sample = draws
        try:
            return pm.sample(
                draws=draws,
                tune=tune,
                chains=chains,
                cores=1,
                step=pooled,
                random_seed=random_seed,
                progressbar=progressbar,
                **kwargs,
            )
        except KeyboardInterrupt:
            pooled._pool.stop_stream()  # interrupted while PyMC recorded: tasks still out
            if own:  # its workers may be in an evaluation: not worth waiting for
                evaluator.close(kill=True)
            trace = pooled.kept_draws(model)
            if trace is None:  # interrupted before any draw was kept
                raise
            return _draws_so_far(trace, model, kwargs)
        finally:
            if own:
                evaluator.close()


def _name(mp_ctx) -> str | None:
    """A start method's name, from its name or a ``multiprocessing`` context (as PyMC takes)."""
    return mp_ctx if mp_ctx is None or isinstance(mp_ctx, str) else mp_ctx.get_start_method()


def _draws_so_far(trace: MultiTrace, model, kwargs: dict):
    """An interrupted run's draws after tuning, as ``pm.sample`` returns them, with a warning."""
    import pymc as pm

    warnings.warn(
        f"Sampling was interrupted: returning the {len(trace)} draws per chain made after "
        "tuning (the posterior only, without sample statistics or tuning draws).",
        UserWarning,
        stacklevel=3,
    )
    if not kwargs.get("return_inferencedata", True):
        return trace
    return pm.to_inference_data(trace, model=model, **(kwargs.get("idata_kwargs") or {}))


@contextlib.contextmanager
def _without_pymcs_cores_advice():
    """Drop PyMC's "enable this by passing cores=n" note: here the evaluator parallelizes."""
    log = logging.getLogger("pymc.sampling.population")

    def keep(record: logging.LogRecord) -> bool:
        return "Chains are not parallelized" not in record.getMessage()

    log.addFilter(keep)
    try:
        yield
    finally:
        log.removeFilter(keep)
