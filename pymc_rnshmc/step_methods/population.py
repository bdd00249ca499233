"""Many chains, one surrogate: a surrogate sampler's chains advanced in lockstep.

PyMC samples a population step (``PopulationArrayStepShared``) in lockstep, in one process:
each iteration steps chain 0, 1, ... in turn, and every chain sees the others' current points.
:class:`PooledSurrogate` makes the chains of a configured sampler (``RNSHMC()``, ...) share one
warm-up: one record of the exact evaluations of all chains, one surrogate fitted on it, one
step-size adaptation, one kernel frozen when tuning ends. At chain 0's call in each iteration
it begins every chain's draw (:meth:`~pymc_rnshmc.step_methods.chain.SurrogateChain.begin`),
has the exact work done in two batches by an evaluator
(:mod:`~pymc_rnshmc.step_methods.evaluators`): the explorers' exact draws (exploring, safety
net) and the surrogate moves' exact ``logp``; then it finishes them, and the other chains'
calls take their results. A fit's own batch (a sparse grid's nodes) goes to the same evaluator.

Each chain keeps its own explorer (PyMC's NUTS and its adaptation), random generator, cached
point and failure count. After tuning each chain is an ordinary Markov chain of the one frozen
kernel, so the draws are exact as a single chain's are; the pooled fit is a tuning-time choice,
frozen with the rest. With an evaluator that streams (worker processes, Dask), the exploration
before the first fit and the kept draws leave lockstep: each chain's next draw is sent as soon
as its last is back (:mod:`~pymc_rnshmc.step_methods.draw_stream`). Each task is a function of
what it is sent, so where the work runs moves no draw; with ``weigh_costs=True`` (the default)
some tuning choices also weigh each chain's measured seconds, and a rerun reproduces its draws
only where those timings fall the same way.
"""

from __future__ import annotations

import contextlib
import copy
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from pymc.backends.base import MultiTrace
from pymc.blocking import DictToArrayBijection, RaveledVars
from pymc.model import modelcontext
from pymc.step_methods.arraystep import PopulationArrayStepShared
from pymc.util import get_random_generator

from pymc_rnshmc._checks import check_flag
from pymc_rnshmc.exceptions import ModelEvaluationError
from pymc_rnshmc.hmc.corrections import Evaluation
from pymc_rnshmc.step_methods.chain import BegunDraw, SurrogateChain
from pymc_rnshmc.step_methods.draw_stream import DrawStream
from pymc_rnshmc.step_methods.draws_so_far import kept_draws_as_trace, pooled_draws
from pymc_rnshmc.step_methods.evaluators import Evaluator, InProcessEvaluator
from pymc_rnshmc.step_methods.explorers import new_explorer
from pymc_rnshmc.step_methods.reporting import progressbar_config, progressbar_update_functions
from pymc_rnshmc.step_methods.schedule import Phase
from pymc_rnshmc.step_methods.warmup import SurrogateWarmup

__all__ = ["PooledSurrogate"]


class _Pool:
    """What the chains of one ``pm.sample`` call share: the warm-up, the chains, the results."""

    def __init__(self) -> None:
        self.stream: DrawStream | None = None
        self.reset()

    def reset(self) -> None:
        """Forget the previous run (in place: every chain's copy of the step holds this pool)."""
        self.stop_stream()
        self.warmup: SurrogateWarmup | None = None
        self.chains: list[SurrogateChain] = []
        self.steps: list[PooledSurrogate] = []
        self.hooks: list[Any] = []
        self.results: dict[int, tuple[RaveledVars, dict[str, Any]]] = {}
        self.stream: DrawStream | None = None
        """With an evaluator that streams, while exploring and after tuning: the chains'
        draws."""
        self.points: list[dict] = []
        """Each chain's point when the stream began: the model's dtypes, as PyMC keeps them."""
        self.exploring: dict[int, dict[int, tuple]] = {}
        """A streamed exploration's finished draws, by round and chain, until the round is
        complete and the warm-up told of it."""
        self.stopped = False
        self.process = os.getpid()
        """Where the chains were linked: they must be stepped there, in lockstep."""

    def stop_stream(self) -> None:
        """Drop the streamed draws' tasks still in flight (a run interrupted, or begun anew)."""
        if self.stream is not None:
            self.stream.cancel()


class PooledSurrogate(PopulationArrayStepShared):
    r"""The chains of a surrogate sampler, sharing one warm-up and surrogate.

    Use it as ``pm.sample(step=PooledSurrogate(RNSHMC()), chains=4)``, or through
    :func:`sample`. The chains share their warm-up in one process, so PyMC steps them in turn
    whatever ``cores`` says (the step refuses the pickling that PyMC's parallel population
    stepping needs, and PyMC falls back); the exact evaluations run where the ``evaluator``
    sends them. From the first fit to the end of tuning the chains go in lockstep; while they
    explore and after tuning, with an evaluator of worker processes or Dask, each chain's next
    draw is sent as soon as its last is back.

    Parameters
    ----------
    sampler : SurrogateHMC
        A configured sampler (``RNSHMC``, ``SparseGridHMC`` or ``RNSRMHMC``) for all the
        model's free variables; its options hold for every chain.
    evaluator : Evaluator, optional
        Runs each round's exact work of all chains, the explorers' draws and the surrogate
        moves' evaluations, each as one batch (:mod:`~pymc_rnshmc.step_methods.evaluators`);
        default one after the other in this process. ``ProcessEvaluator(workers=4)`` runs
        them in local worker processes.
    share_exploration : bool
        Let the chains share the exploration before the first fit: each explores
        ``1 / chains`` of one chain's length (at least 50 draws), and the start rule judges
        the pooled fit on held-out draws as for one chain. Off by default, by measurement
        (4 chains, 11 posteriors, 4 seeds; docs/many-chains.md): it cut the exact evaluations
        before the surrogate 1.3-5.3x, but more were spent after the start, and the bulk ESS
        per exact evaluation fell below the default's on 7 of the 11 (to 0.74x; on diamonds,
        one seed, 0.19x the ESS per draw).

    References
    ----------
    .. [1] Zhang, C., Shahbaba, B., & Zhao, H. (2017). Hamiltonian Monte Carlo acceleration
       using surrogate functions with random bases. Statistics and Computing, 27(6), 1473-1490.
    .. [2] Foreman-Mackey, D., Hogg, D. W., Lang, D., & Goodman, J. (2013). emcee: the MCMC
       hammer. PASP, 125(925), 306 (an ensemble's moves applied through a pool).

    Examples
    --------
    >>> import pymc as pm
    >>> from pymc_rnshmc import RNSHMC, PooledSurrogate
    >>> with pm.Model():
    ...     x = pm.Normal("x", 1, 2, shape=2)
    ...     step = PooledSurrogate(RNSHMC(exploration_steps=100, weigh_costs=False))
    ...     idata = pm.sample(
    ...         step=step, tune=300, draws=200, chains=2, cores=1, random_seed=1,
    ...         progressbar=False, compute_convergence_checks=False,
    ...     )
    >>> idata.posterior["x"].shape
    (2, 200, 2)
    >>> bool(abs(idata.posterior["x"].mean() - 1.0) < 0.3)
    True
    """

    default_blocked = True

    def __init__(
        self,
        sampler,
        *,
        evaluator: Evaluator | None = None,
        share_exploration: bool = False,
        model=None,
    ) -> None:
        model = modelcontext(model)
        _check_poolable(sampler, model)
        self.sampler = sampler
        self.evaluator = InProcessEvaluator() if evaluator is None else evaluator
        self.share_exploration = check_flag("share_exploration", share_exploration)
        self.stats_dtypes_shapes = sampler.stats_dtypes_shapes
        self.stats_dtypes = sampler.stats_dtypes
        self._pool = _Pool()
        self._tune_steps = self._draws = None
        self._draws_from_sample: int | None = None
        """The kept draws per chain, as :func:`sample` knows them (PyMC 5 does not say)."""
        super().__init__(sampler.vars, sampler.exact_model.step_function._extra_vars_shared)
        self.tune = True

    # ----------------------------------------------------------------- a chain's set-up
    def setup_chain(self, rng, tune: int, draws: int) -> None:  # PyMC >= 6
        self._tune_steps, self._draws = int(tune), int(draws)
        self.set_rng(rng)

    def set_rng(self, rng) -> None:
        """Take the chain's generator (PyMC 5's per-chain call; PyMC 6's ``setup_chain``)."""
        self.rng = get_random_generator(rng, copy=False)
        self.tune = True

    def link_population(self, population, chain_index: int) -> None:
        """Join the population as chain ``chain_index`` (PyMC links them in order from 0)."""
        self.population = population
        self.this_chain = chain_index
        self.other_chains = [c for c in range(len(population)) if c != chain_index]
        if chain_index == 0:  # a new run: the copies made so far share this very pool
            self._pool.reset()
            exploring = len(population) if self.share_exploration else 1
            self._pool.warmup = SurrogateWarmup(
                self.sampler._warmup_settings,
                self._tune_steps,
                chains=exploring,
                draws=self._draws,
            )
            self.evaluator.start(self.sampler)
        self._join()

    def _join(self) -> None:
        """Make this chain's parts: its explorer, exact model's failure count, hooks, chain."""
        sampler, pool = self.sampler, self._pool
        exact_model = sampler.exact_model.for_another_chain()
        explorer = new_explorer(
            type(sampler).__name__,
            exact_model,
            sampler.vars,
            exact_model.step_function,
            sampler._nuts_options,
            from_mode=sampler.options.explore_from_mode,
        )
        explorer.use_rng(self.rng)
        chain = SurrogateChain(
            sampler._warmup_settings,
            self._tune_steps,
            explorer,
            exact_model,
            sampler.safety_net,
            explorer.dual_averaging,
            sampler._richer_surrogate,
            warmup=pool.warmup,
        )
        chain.sharing = pool.chains
        hooks = copy.copy(sampler)
        hooks._chain, hooks._explorer, hooks.exact_model, hooks.rng = (
            chain,
            explorer,
            exact_model,
            self.rng,
        )
        hooks.batch_evaluator = self.evaluator  # a fit's batches (a sparse grid's nodes)
        pool.chains.append(chain)
        pool.steps.append(self)
        pool.hooks.append(hooks)

    def reset_tuning(self, start=None) -> None:
        """Nothing to reset: each chain's parts are made afresh when it joins."""

    def stop_tuning(self) -> None:
        """End tuning for every chain at chain 0's call: fit if due, freeze the one kernel."""
        self.tune = False
        pool = self._pool
        if pool.stopped:
            return
        pool.stopped = True
        first, *others = pool.chains
        with self._keeping_pooled_draws():
            first.stop_tuning(pool.steps[0].rng, pool.hooks[0])
        # the other chains' steps hear of it after this round: their first kept draw is made now
        for chain, hooks, step in zip(others, pool.hooks[1:], pool.steps[1:]):
            chain.explorer.stop_tuning()
            chain.tune = hooks.tune = step.tune = False

    # ----------------------------------------------------------------- stepping
    def astep(self, q0: RaveledVars) -> tuple[RaveledVars, list[dict[str, Any]]]:
        pool = self._pool
        if os.getpid() != pool.process:
            raise RuntimeError(
                "PooledSurrogate's chains share one warm-up in one process, but PyMC stepped "
                "them in separate processes (cores > 1). Pass cores=1; to evaluate the model "
                "in parallel, give PooledSurrogate an evaluator (ProcessEvaluator(workers=n))."
            )
        if self.this_chain == 0:
            if pool.stream is not None and pool.stream.spent:
                pool.stream = None
            if pool.stream is None:
                pool.stream = self._new_stream()
        if pool.stream is not None:
            with self._keeping_pooled_draws(), self._cancelling_on_exit(pool.stream):
                q_new, stats = pool.stream.next_draw(self.this_chain)
            return q_new, [stats]
        if self.this_chain == 0:
            with self._keeping_pooled_draws():
                pool.results = self._round()
        q_new, stats = pool.results.pop(self.this_chain)
        return q_new, [stats]

    def _new_stream(self) -> DrawStream | None:
        """The chains' draws from here on, none waiting for another's, where that may be.

        After tuning, the kept draws; while exploring (with the tuning length known), the
        exploration's draws up to the first fit. ``None`` where the chains go in lockstep, or
        the evaluator cannot send one task at a time.
        """
        pool = self._pool
        if not hasattr(self.evaluator, "first_done"):
            return None
        if not any(step.tune for step in pool.steps):
            kept = self._draws if self._draws is not None else self._draws_from_sample
            return self._stream(kept, tune=False)
        warmup = pool.warmup
        if warmup.phase != Phase.EXPLORATION or self._tune_steps is None:
            return None
        first_fit = min(warmup.start.exploration_length(), self._tune_steps)
        draws = first_fit - pool.chains[0].iter_count
        return self._stream(draws, tune=True) if draws > 1 else None

    def _stream(self, draws: int | None, tune: bool) -> DrawStream:
        """A stream of ``draws`` draws per chain from PyMC's current points."""
        pool = self._pool
        for hooks in pool.hooks:  # as a lockstep round would set them
            hooks.tune = tune
        pool.points = [dict(point) for point in self.population]
        pool.exploring = {}
        positions = [
            DictToArrayBijection.map({name: point[name] for name in self.var_names})
            for point in pool.points
        ]
        rngs = [step.rng for step in pool.steps]
        finish = self._finish_streamed_draw
        return DrawStream(
            pool.chains, rngs, pool.hooks, positions, self.evaluator, draws, finish, tune=tune
        )

    def _finish_streamed_draw(self, index: int, begun: BegunDraw, evaluation, draw, started):
        """A streamed draw's second half; its clock runs from its beginning to now.

        An exploring draw's news for the warm-up (its evaluations for the record, a Laplace
        approximation) and its cost wait their turn: the warm-up hears of them in lockstep
        order, once every chain has finished the round, so the record is the one lockstep makes.
        """
        pool = self._pool
        chain, hooks, tune = pool.chains[index], pool.hooks[index], pool.steps[index].tune
        told = []
        evaluate = _precomputed(evaluation, chain, hooks, tune)
        tell = (lambda exact, record: told.append((exact, record))) if tune else None
        q_new, stats = chain.finish(begun, pool.steps[index].rng, hooks, evaluate, draw, tell)
        q_new, stats = self._timed(index, q_new, stats, started)
        if tune:
            work = draw if draw is not None else evaluation
            seconds = float("nan") if work is None else work.seconds
            pool.exploring.setdefault(chain.iter_count, {})[index] = (begun, stats, told, seconds)
            self._tell_finished_rounds()
        return q_new, stats

    def _tell_finished_rounds(self) -> None:
        """Tell the warm-up of every round all chains have finished, in lockstep order.

        Each chain's draw is charged its own work where it ran, as in a lockstep round
        (:meth:`_batch`); where that was not measured, the round's longest draw shared among
        the chains, as a lockstep round's wall time.
        """
        pool = self._pool
        while pool.exploring:
            iteration = min(pool.exploring)
            finished = pool.exploring[iteration]
            if len(finished) < len(pool.chains):
                return
            longest = max(stats["perf_counter_diff"] for _, stats, _, _ in finished.values())
            shared = longest / len(finished)
            for index in sorted(finished):
                begun, stats, told, seconds = finished[index]
                for draw, record in told:
                    pool.warmup.learn_from_exact(draw, record)
                charged = seconds + begun.fitting if np.isfinite(seconds) else shared
                pool.chains[index].account(begun, stats, charged)
            del pool.exploring[iteration]

    def _timed(self, index: int, q_new: RaveledVars, stats: dict, started: float):
        """The draw as PyMC keeps it, its clock from its beginning to now."""
        q_new = self._as_pymc_keeps(q_new, self._pool.points[index])
        stats["perf_counter_start"] = started
        stats["perf_counter_diff"] = stats["process_time_diff"] = time.perf_counter() - started
        return q_new, stats

    def _as_pymc_keeps(self, q: RaveledVars, point: dict) -> RaveledVars:
        """``q`` as PyMC hands it back next iteration: each variable in its own dtype.

        PyMC's step turns the draw into a point of the model's dtypes and the next draw's
        start back into an array; the stream starts a chain's next draw at once, so it makes
        the same round trip here (a float32 variable is rounded as in lockstep).
        """
        point = DictToArrayBijection.rmap(q, start_point=point)
        return DictToArrayBijection.map({name: point[name] for name in self.var_names})

    @staticmethod
    @contextlib.contextmanager
    def _cancelling_on_exit(stream: DrawStream):
        """An interrupt or an error drops the stream's tasks in flight."""
        try:
            yield
        except BaseException:
            stream.cancel()
            raise

    @contextlib.contextmanager
    def _keeping_pooled_draws(self):
        """A ``ModelEvaluationError`` leaves with every chain's draws, ``(chain, draw, ...)``."""
        try:
            yield
        except ModelEvaluationError as error:
            chains = self._pool.chains
            error.draws = pooled_draws(chains, chains[0].failures.layout)
            error.chains = len(chains)
            error.tuning_draws = max(chain.log.tuning_draws for chain in chains)
            raise

    def _round(self) -> dict[int, tuple[RaveledVars, dict[str, Any]]]:
        """Every chain's draw of this iteration; the exact work as two batches."""
        pool = self._pool
        clocks = np.zeros(len(pool.chains))
        begun: list[BegunDraw] = []
        for index, (chain, step, hooks) in enumerate(zip(pool.chains, pool.steps, pool.hooks)):
            start = time.perf_counter()
            hooks.tune = step.tune
            point = self.population[index]
            q0 = DictToArrayBijection.map({name: point[name] for name in self.var_names})
            begun.append(chain.begin(q0, step.tune, step.rng, hooks))
            clocks[index] += time.perf_counter() - start
        exact_draws = self._explore(begun, clocks)
        evaluations = self._evaluate(begun, clocks)
        results = {}
        for index, (chain, step, hooks) in enumerate(zip(pool.chains, pool.steps, pool.hooks)):
            start = time.perf_counter()
            evaluate = _precomputed(evaluations.get(index), chain, hooks, step.tune)
            draw = exact_draws.get(index)
            q_new, stats = chain.finish(begun[index], step.rng, hooks, evaluate, draw)
            clocks[index] += time.perf_counter() - start
            chain.account(begun[index], stats, clocks[index])
            stats["perf_counter_start"] = start
            stats["perf_counter_diff"] = clocks[index]
            stats["process_time_diff"] = clocks[index]
            results[index] = (q_new, stats)
        return results

    def _explore(self, begun: list[BegunDraw], clocks: np.ndarray) -> dict:
        """The round's exact draws (explorers' draws), one batch; each chain charged its own."""
        pool = self._pool
        waiting = [i for i, draw in enumerate(begun) if draw.exact_phase is not None]
        requests = [
            (
                pool.chains[i],
                begun[i].q0,
                begun[i].exact_start,
                pool.steps[i].tune,
                pool.steps[i].rng,
            )
            for i in waiting
        ]
        return self._batch(waiting, requests, self.evaluator.explore, clocks)

    def _evaluate(self, begun: list[BegunDraw], clocks: np.ndarray) -> dict:
        """The round's surrogate moves' exact evaluations, one batch; each charged its own."""
        pool = self._pool
        waiting = [i for i, draw in enumerate(begun) if draw.position_to_evaluate is not None]
        requests = [
            (pool.chains[i].exact_model, begun[i].position_to_evaluate, begun[i].wants_gradient)
            for i in waiting
        ]
        return self._batch(waiting, requests, self.evaluator.evaluate, clocks)

    def _batch(self, waiting: list[int], requests: list, run, clocks: np.ndarray) -> dict:
        """``run(requests)`` for the chains ``waiting``; each is charged its own work.

        Its own work is what its request took where it ran (the evaluators measure it), so a
        chain's charge does not depend on how many workers shared the batch; an evaluator that
        does not measure it has each chain charged an equal share of the batch's wall time.
        """
        if not requests:
            return {}
        pool = self._pool
        start = time.perf_counter()
        try:
            results = run(requests)
        except ModelEvaluationError as error:
            chain = pool.chains[waiting[0]]
            where = f"in a batch of the {chain.phase} phase (chains {waiting})"
            chain.log.locate(error, where, chain.failures.layout)
            raise
        clocks[waiting] += _own_seconds(results, (time.perf_counter() - start) / len(waiting))
        return dict(zip(waiting, results))

    # ----------------------------------------------------------------- PyMC protocol
    def __copy__(self) -> PooledSurrogate:
        """PyMC's copy for each chain: the same pool, sampler and evaluator (shared)."""
        other = object.__new__(type(self))
        other.__dict__.update(self.__dict__)
        return other

    def __getstate__(self):
        """Refuse to be pickled: the chains share their warm-up in this process.

        PyMC pickles population steps to step them in separate processes (``cores > 1``);
        refused, it steps them here in turn, which is what the pool needs.
        """
        raise TypeError(
            "PooledSurrogate is not picklable: its chains share one warm-up in one process. "
            "Parallel evaluations come from its evaluator (ProcessEvaluator(workers=n))."
        )

    def kept_draws(self, model) -> MultiTrace | None:
        """The chains' draws after tuning so far (an interrupted run), or ``None``."""
        chains = self._pool.chains
        if not chains:
            return None
        return kept_draws_as_trace(model, chains, chains[0].failures.layout)

    _progressbar_config = staticmethod(progressbar_config)
    _make_progressbar_update_functions = staticmethod(progressbar_update_functions)


def _precomputed(
    evaluation: Evaluation | None, chain: SurrogateChain, hooks, tune: bool
) -> Callable[[np.ndarray], Evaluation]:
    """The correction's ``evaluate``: the batch's evaluation where it was made, else in place."""
    fallback = hooks._evaluate_end if tune else chain.exact_model.evaluate

    def evaluate(position: np.ndarray) -> Evaluation:
        if evaluation is not None and np.array_equal(position, evaluation.position):
            return evaluation
        return fallback(position)

    return evaluate


def _own_seconds(results: list, share: float) -> np.ndarray | float:
    """Each result's measured ``seconds``, or ``share`` for all if any was not measured."""
    seconds = np.array([result.seconds for result in results], dtype=float)
    return seconds if np.isfinite(seconds).all() else share


def _check_poolable(sampler, model) -> None:
    """Raise unless ``sampler``'s chains can share one warm-up."""
    from pymc_rnshmc.step_methods.arnshmc import ARNSHMC
    from pymc_rnshmc.step_methods.surrogate_hmc import SurrogateHMC

    if not isinstance(sampler, SurrogateHMC):
        raise TypeError(
            f"PooledSurrogate takes a configured surrogate sampler (RNSHMC(), SparseGridHMC(), "
            f"RNSRMHMC()), got {type(sampler).__name__}."
        )
    if isinstance(sampler, ARNSHMC):
        raise ValueError(
            "ARNSHMC's online estimator learns from each chain's own draws; chains sharing one "
            "surrogate would need one estimator for all. Use RNSHMC, whose pooled fit refits "
            "on every chain's evaluations."
        )
    if not getattr(sampler, "exact_acceptance", True):
        raise ValueError(
            "SparseGridHMC(exact_acceptance=False) is approximate by design; pooled chains "
            "take exact samplers only. Use exact_acceptance=True."
        )
    owned = {var.name for var in sampler.vars}
    missing = sorted(var.name for var in model.value_vars if var.name not in owned)
    if missing:
        raise ValueError(
            f"PooledSurrogate samples all of the model's free variables; "
            f"{type(sampler).__name__} was given a subset (not {', '.join(missing)}). Build "
            "the sampler without vars=, or sample the others another way."
        )
