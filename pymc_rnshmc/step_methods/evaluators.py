"""Where a population's exact work runs: in this process, or in worker processes.

A round of pooled chains (:mod:`~pymc_rnshmc.step_methods.population`) needs, per chain, either
one exact ``logp`` (a surrogate move's correction, with the gradient while the surrogate
learns) or one exact draw of the chain's explorer (exploring, a safety-net draw, or exact draws
after a fall-back: a NUTS trajectory of exact gradients). An evaluator takes each kind as one
batch: :meth:`Evaluator.evaluate` returns an :class:`~pymc_rnshmc.hmc.corrections.Evaluation`
per request, :meth:`Evaluator.explore` an :class:`~pymc_rnshmc.step_methods.explorers.ExactDraw`
per request, in order. An explorer's draw on a worker starts from the chain's explorer state
and random generator, shipped with the request, and returns both advanced, so the chain goes on
exactly as if it had drawn here. Failures are counted on the
requesting chain's exact model, as in a single chain
(:mod:`~pymc_rnshmc.step_methods.model_failures`): a rejected error or a non-finite ``logp``
is a counted rejection, another error stops the sampler with a
:class:`~pymc_rnshmc.exceptions.ModelEvaluationError`. A worker that dies is not the model's
answer: :class:`ProcessEvaluator` starts a new pool and resubmits the whole batch (up to
``restarts`` times per batch, with a :class:`~pymc_rnshmc.exceptions.SurrogateWarning` each
time), Dask's scheduler reruns the dead worker's tasks. A batch's results are applied to the
chains only once all have arrived, so a resubmitted batch gives the draws an undisturbed one
would have.

:class:`ProcessEvaluator` hands the batch to ``concurrent.futures`` worker processes (the
standard library's pool), :class:`DaskEvaluator` to a ``dask.distributed`` cluster: no
scheduler of our own. Each worker unpickles the sampler once (the compiled model and an
explorer) and keeps it; a request carries a position, or a chain's explorer and generator
states. The results do not depend on the number of workers: each task is a function of what it
is sent. Each task also measures its own work (``seconds``), which the chains' cost-weighing
choices read (``weigh_costs``); with ``weigh_costs=False`` the draws depend on the seed alone.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import copy
import multiprocessing
import time
import uuid
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Protocol

import cloudpickle
import numpy as np
import pytensor
from pymc.blocking import RaveledVars

from pymc_rnshmc._checks import check_non_negative_integer, check_positive_integer
from pymc_rnshmc.exceptions import SurrogateWarning
from pymc_rnshmc.hmc.corrections import Evaluation
from pymc_rnshmc.step_methods.explorers import ExactDraw

__all__ = [
    "DaskEvaluator",
    "Evaluator",
    "InProcessEvaluator",
    "ProcessEvaluator",
    "Streaming",
]

Request = tuple[Any, np.ndarray, bool]
"""``(exact_model, position, gradient)``: a chain's exact model, where, with the gradient?"""
DrawRequest = tuple[Any, RaveledVars, Any, bool, np.random.Generator]
"""``(chain, q0, start, tune, rng)``: the chain whose explorer draws from ``q0`` (``start``:
its point with its ``logp``, if known), tuning or not, with the chain's generator."""


class Evaluator(Protocol):
    """Runs one round's exact work of all chains, each kind as one batch, in order."""

    def start(self, sampler) -> None:
        """Prepare for ``sampler``'s model (the workers load it once)."""
        ...

    def evaluate(self, requests: Sequence[Request]) -> list[Evaluation]: ...

    def explore(self, requests: Sequence[DrawRequest]) -> list[ExactDraw]: ...


class Streaming(Protocol):
    """An evaluator whose tasks can also be sent and waited for one at a time.

    While exploring and after tuning, pooled chains do not wait for each other
    (:mod:`~pymc_rnshmc.step_methods.draw_stream`): each chain's next task is sent as soon as
    its last is back.
    """

    def submit(self, function: Callable, *args) -> Any:
        """``function(token, *args)`` on a worker that holds the sampler; a future."""
        ...

    def first_done(self, futures: set) -> set:
        """Wait until at least one of ``futures`` is done; those that are."""
        ...

    def recover(self, error: BaseException, attempt: int) -> bool:
        """Whether the tasks lost to ``error`` may be sent again (the evaluator made ready).

        ``attempt``: the most times any of the lost tasks was lost so far, from 1.
        """
        ...


class InProcessEvaluator:
    """Evaluates a round's requests one after the other, in this process (the default)."""

    def start(self, sampler) -> None:
        """Nothing to prepare."""

    def evaluate(self, requests: Sequence[Request]) -> list[Evaluation]:
        return [
            timed(exact_model.evaluate, position, gradient)
            for exact_model, position, gradient in requests
        ]

    def explore(self, requests: Sequence[DrawRequest]) -> list[ExactDraw]:
        return [
            timed(chain.explorer.draw, q0, start, tune, rng)
            for chain, q0, start, tune, rng in requests
        ]


def timed(work: Callable, *args):
    """``work(*args)``, an ``Evaluation`` or ``ExactDraw``, with its ``seconds`` measured.

    A pooled chain's tuning draw is charged its own work, wherever it ran: what the chains'
    choices weigh does not depend on how many workers share the load.
    """
    started = time.perf_counter()
    result = work(*args)
    return result._replace(seconds=time.perf_counter() - started)


_WORKER_SAMPLER = {}
"""In a worker process: the sampler it unpickled (its exact model and explorer) and the
``floatX`` it was built under, by token."""


def pickled_for_workers(sampler) -> bytes:
    """``sampler`` pickled with the ``floatX`` it was built under, for :func:`_install`.

    A worker's PyTensor has its own default ``floatX``; PyMC's NUTS reads it as it draws (a
    float32 model's exploring draws on a worker differed from those in this process, on
    PyMC 5). Each task runs under the sampler's.
    """
    return cloudpickle.dumps((pytensor.config.floatX, cloudpickle.dumps(sampler)))


def _install(token: str, payload: bytes) -> None:
    """Unpickle the sampler in this worker and compile its model (a call of each function).

    Compiled here, the first task's measured ``seconds`` hold its own work, not a compilation
    (about a second per function under PyTensor's Numba backend).
    """
    float_x, pickled = cloudpickle.loads(payload)
    with pytensor.config.change_flags(floatX=float_x):
        sampler = cloudpickle.loads(pickled)
        sampler.exact_model.warm_up()
        _WORKER_SAMPLER[token] = (sampler, float_x)


def _evaluate_in_worker(token: str, position: np.ndarray, gradient: bool, by_joint: bool):
    """The exact evaluation, with the function the requesting chain would use for ``logp``.

    ``by_joint``: the chain's ``logp_by_joint``, chosen at its first fit, after the workers
    unpickled the sampler.
    """
    sampler, float_x = _WORKER_SAMPLER[token]
    sampler.exact_model.logp_by_joint = by_joint
    with pytensor.config.change_flags(floatX=float_x):
        evaluation = timed(sampler.exact_model.evaluate, position, gradient)
    return evaluation, sampler.exact_model.failures.take()


def _draw_in_worker(token: str, explorer_state, rng_state: dict, q0, start, tune: bool):
    """The chain's explorer's draw, from its state and generator; both returned advanced."""
    sampler, float_x = _WORKER_SAMPLER[token]
    explorer = sampler._explorer
    explorer.sampling_state = explorer_state
    rng = np.random.default_rng()
    rng.bit_generator.state = rng_state
    explorer.share_rng(rng)
    with pytensor.config.change_flags(floatX=float_x):
        draw = timed(explorer.draw, q0, start, tune, rng)
    failures = sampler.exact_model.failures.take()
    return draw, explorer.sampling_state, rng.bit_generator.state, failures


def _results(futures: list) -> list:
    """Every future's result, in order: nothing is applied before the whole batch is back."""
    return [future.result() for future in futures]


def send_draw(submit, request: DrawRequest):
    """Send one explorer's draw (its explorer and generator states go with it); a future."""
    chain, q0, start, tune, rng = request
    state = chain.explorer.sampling_state
    return submit(_draw_in_worker, state, rng.bit_generator.state, q0, start, tune)


def take_draw(request: DrawRequest, result) -> ExactDraw:
    """The draw sent for ``request``: its chain takes back its advanced explorer and generator."""
    chain, _, _, _, rng = request
    draw, explorer_state, rng_state, (count, first) = result
    chain.explorer.sampling_state = explorer_state
    rng.bit_generator.state = rng_state
    chain.explorer.share_rng(rng)
    chain.exact_model.failures.add(count, first)
    return draw


def send_evaluation(submit, request: Request):
    """Send one exact evaluation; a future."""
    exact_model, position, gradient = request
    return submit(_evaluate_in_worker, np.asarray(position), gradient, exact_model.logp_by_joint)


def take_evaluation(request: Request, result) -> Evaluation:
    """The evaluation sent for ``request``, its failures counted on the chain's exact model."""
    evaluation, (count, first) = result
    request[0].failures.add(count, first)
    return evaluation


def explore_with(submit, requests: Sequence[DrawRequest]) -> list[ExactDraw]:
    """The explorers' draws, each sent with ``submit(function, *args) -> future``.

    The chains are updated only once every result is back: a batch that fails midway leaves
    them as they were, ready to resubmit.
    """
    futures = [send_draw(submit, request) for request in requests]
    return [take_draw(*pair) for pair in zip(requests, _results(futures))]


def evaluate_with(submit, requests: Sequence[Request]) -> list[Evaluation]:
    """The exact evaluations, each sent with ``submit``; failures counted on each chain.

    As in :func:`explore_with`, failures are counted only once every result is back (a
    ``ModelEvaluationError`` re-raises before any chain is touched).
    """
    futures = [send_evaluation(submit, request) for request in requests]
    return [take_evaluation(*pair) for pair in zip(requests, _results(futures))]


def potentials_with(evaluator: Evaluator, exact_model) -> Callable[[np.ndarray], np.ndarray]:
    """Exact ``U`` at rows ``(n, d)``, in order, the rows sent to ``evaluator`` as one batch.

    ``inf`` where the model fails, counted on ``exact_model``. A sparse grid's nodes go this
    way (SparseGridHMC): in this process one after the other, or, for pooled chains, on the
    evaluator's workers at once. One call per row: vectorizing the model's logp graph over rows
    (pytensor's ``vectorize_graph``) took 9-34 s to compile and was no faster per row on the
    benchmark workloads.
    """

    def potentials(positions: np.ndarray) -> np.ndarray:
        requests = [(exact_model, row, False) for row in np.atleast_2d(positions)]
        return -np.array([evaluation.logp for evaluation in evaluator.evaluate(requests)])

    return potentials


class ProcessEvaluator:
    """Evaluates each round's requests in parallel, in local worker processes.

    Parameters
    ----------
    workers : int
        Worker processes (each evaluates one request at a time).
    context : str
        The ``multiprocessing`` start method; ``"spawn"`` (default) starts clean interpreters,
        each importing PyMC once (seconds), which suits models whose evaluation takes
        milliseconds or more.
    restarts : int
        Times a batch is resubmitted to a new pool when a worker process dies during it (the
        standard library's pool is then broken for good); ``0`` fails at the first death. For
        the kept draws, which are sent one task per chain rather than in batches, the times
        any one task is resubmitted.

    Raises
    ------
    RuntimeError
        From :meth:`explore` or :meth:`evaluate`, when the pool broke ``restarts + 1`` times
        in one batch.

    Notes
    -----
    The pool starts when a population starts (:meth:`start`, with the sampler, which each
    worker unpickles once with its compiled model), and stops with :meth:`close` or when the
    evaluator is garbage collected. For cheap models the round trip to a process costs more
    than the evaluation: :func:`~pymc_rnshmc.sample`'s default
    (:class:`~pymc_rnshmc.step_methods.local_evaluator.LocalEvaluator`) weighs the two.

    A worker that dies (killed, out of memory, a crash in compiled code) is not a model
    failure: the batch is resubmitted whole to a new pool, whose workers unpickle the same
    sampler, with a :class:`~pymc_rnshmc.exceptions.SurrogateWarning`. Each task is a function
    of what it is sent, so the draws are those of an undisturbed run.
    """

    def __init__(self, workers: int = 2, context: str = "spawn", restarts: int = 2) -> None:
        self.workers = check_positive_integer("workers", workers)
        self.context = context
        self.restarts = check_non_negative_integer("restarts", restarts)
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None
        self._token: str | None = None
        self._payload: bytes | None = None

    def start(self, sampler) -> None:
        """Start the pool for ``sampler``: each worker unpickles it (its compiled model) once."""
        self.close()
        self._token = f"sampler-{id(sampler)}"
        self._payload = pickled_for_workers(sampler)
        self._open_pool()
        # a forking pool starts all its workers at the first task: here, before PyMC's progress
        # bar starts a thread that the children would inherit
        self._pool.submit(int).result()

    def explore(self, requests: Sequence[DrawRequest]) -> list[ExactDraw]:
        return self._with_restarts(lambda submit: explore_with(submit, requests), len(requests))

    def evaluate(self, requests: Sequence[Request]) -> list[Evaluation]:
        return self._with_restarts(lambda submit: evaluate_with(submit, requests), len(requests))

    def _open_pool(self) -> None:
        """A new pool whose workers unpickle the sampler pickled at :meth:`start`."""
        self._pool = concurrent.futures.ProcessPoolExecutor(
            max_workers=self.workers,
            mp_context=multiprocessing.get_context(self.context),
            initializer=_install,
            initargs=(self._token, self._payload),
        )

    def _with_restarts(self, batch: Callable[[Callable], list], size: int) -> list:
        """``batch(submit)``, run again on a new pool each time a worker dies, ``restarts`` times.

        ``batch`` must leave the chains untouched when it raises (see :func:`explore_with`).
        """
        for restart in range(self.restarts + 1):
            try:
                return batch(self.submit)
            except BrokenProcessPool as error:
                broken = error
            self.close(kill=True)
            if restart < self.restarts:
                self._warn_restart(restart + 1, f"a batch of {size} exact evaluations")
                self._open_pool()
        work = f"a batch of {size} exact evaluations"
        raise RuntimeError(_exhausted_message(self.restarts, self.workers, work)) from broken

    def _warn_restart(self, restart: int, work: str) -> None:
        warnings.warn(
            f"A worker process of the ProcessEvaluator died during {work}; started "
            f"{self.workers} new workers and resubmitted what was lost (restart {restart} of at "
            f"most {self.restarts}). The draws are unaffected: each task is a function of what "
            "it is sent.",
            SurrogateWarning,
            stacklevel=5,
        )

    def submit(self, function, *args):
        return self._pool.submit(function, self._token, *args)

    def first_done(self, futures: set) -> set:
        return concurrent.futures.wait(futures, return_when=concurrent.futures.FIRST_COMPLETED)[0]

    def recover(self, error: BaseException, attempt: int) -> bool:
        """After a worker died: a new pool, up to ``restarts`` times per task, with a warning."""
        if not isinstance(error, BrokenProcessPool):
            return False
        self.close(kill=True)
        work = "the pooled chains' streamed draws"
        if attempt > self.restarts:
            raise RuntimeError(_exhausted_message(self.restarts, self.workers, work)) from error
        self._warn_restart(attempt, work)
        self._open_pool()
        return True

    def close(self, kill: bool = False) -> None:
        """Stop the worker processes; with ``kill``, end them at once, in their work or not.

        Without ``kill`` the pool waits for the evaluations running (after an interrupt, up to
        one model evaluation per worker). A broken pool is always killed: its own clean-up ends
        the workers it knew of when one died, then waits for all, and a worker still starting
        then (spawned by the lost batch's submissions) is never told to stop.
        """
        if self._pool is not None and kill:
            for process in list((getattr(self._pool, "_processes", None) or {}).values()):
                process.kill()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        self._pool = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass


def _exhausted_message(restarts: int, workers: int, work: str) -> str:
    """Why the sampler stops after ``work`` broke its pool ``restarts + 1`` times."""
    tries = f"{restarts + 1} time" + ("s" if restarts else "")
    return (
        f"A worker process of the ProcessEvaluator ({workers} workers) died each time "
        f"{work} was tried: {tries}, with restarts={restarts}. A worker "
        "that dies rather than raising has usually run out of memory, been killed, or crashed "
        "in compiled code. Rerun with InProcessEvaluator() (sample(cores=1)) to see the model's "
        "error, use fewer workers if memory is short, or give ProcessEvaluator more restarts."
    )


def _installed(function, token: str, payload, *args):
    """``function(token, *args)`` on a Dask worker, unpickling the sampler there at first use.

    The arguments are copied first: Dask may hand over arrays that view its receive buffers,
    unaligned, which PyTensor's C functions refuse.
    """
    if token not in _WORKER_SAMPLER:
        _install(token, payload)
    return function(token, *copy.deepcopy(args))


class DaskEvaluator:
    """Runs each round's batches on a ``dask.distributed`` cluster.

    Parameters
    ----------
    client : distributed.Client
        A client of the cluster (a ``LocalCluster``, or a real one).
    retries : int
        Times Dask reruns a task that raised (default none: a model's error is its answer,
        and a served model that did not answer within its timeout should not be waited for
        again). A task whose worker died is rerun by the scheduler whatever this says, up to
        Dask's ``distributed.scheduler.allowed-failures`` (3 by default).

    Notes
    -----
    The pickled sampler is scattered to every worker once (``broadcast``); each worker
    unpickles it at its first task and keeps it, so a worker that joins later gets it too.
    Every task is a function of what it is sent, so the draws do not depend on the number of
    workers or on which worker ran what (with ``weigh_costs=True``, beyond what its measured
    seconds move: see :mod:`~pymc_rnshmc.step_methods.population`). Dask cannot recompute
    scattered data: where the workers that held it died, the batch's tasks come back
    cancelled ("already forgotten": once in six CI runs of the killed-worker test,
    2026-11-28), and the batch is sent once more with the sampler scattered again. The chains
    take nothing from a batch until all of it is back, so the second try gives the same draws.
    """

    def __init__(self, client, retries: int = 0) -> None:
        self.client = client
        self.retries = check_non_negative_integer("retries", retries)
        self._token: str | None = None
        self._pickled: bytes | None = None
        self._payload = None

    def start(self, sampler) -> None:
        """Send the pickled sampler to every worker, once."""
        self._token = f"sampler-{id(sampler)}-{uuid.uuid4().hex}"
        self._pickled = pickled_for_workers(sampler)
        self._payload = self.client.scatter(self._pickled, broadcast=True)

    def explore(self, requests: Sequence[DrawRequest]) -> list[ExactDraw]:
        return self._batch(explore_with, requests)

    def evaluate(self, requests: Sequence[Request]) -> list[Evaluation]:
        return self._batch(evaluate_with, requests)

    def _batch(self, send, requests):
        """``send(submit, requests)``; again with the sampler scattered anew if it was lost."""
        try:
            return send(self.submit, requests)
        except concurrent.futures.CancelledError:
            self._payload = self.client.scatter(self._pickled, broadcast=True)
            return send(self.submit, requests)

    def first_done(self, futures: set) -> set:
        """Wait on this evaluator's client (not Dask's default) until one of ``futures`` is done.

        A cancelled future (its scattered sampler lost) counts as done: its ``result`` raises,
        and the stream recovers.
        """
        from distributed import wait

        with contextlib.suppress(concurrent.futures.CancelledError), self.client.as_current():
            wait(list(futures), return_when="FIRST_COMPLETED")
        return {future for future in futures if future.done()}

    def recover(self, error: BaseException, attempt: int) -> bool:
        """After the scattered sampler was lost with its workers: scattered again, once per task."""
        if not isinstance(error, concurrent.futures.CancelledError) or attempt > 1:
            return False
        self._payload = self.client.scatter(self._pickled, broadcast=True)
        return True

    def submit(self, function, *args):
        return self.client.submit(
            _installed,
            function,
            self._token,
            self._payload,
            *args,
            pure=False,
            retries=self.retries,
        )
