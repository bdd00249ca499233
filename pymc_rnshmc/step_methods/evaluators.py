"""Where a population's exact evaluations run: in this process, or in worker processes.

A round of pooled chains (:mod:`~pymc_rnshmc.step_methods.population`) needs one exact ``logp``
per surrogate move, with the gradient while the surrogate learns. An evaluator takes them as one
batch of requests ``(exact_model, position, gradient)`` and returns an
:class:`~pymc_rnshmc.hmc.corrections.Evaluation` for each, in order. Failures are counted on the
requesting chain's exact model, as in a single chain
(:mod:`~pymc_rnshmc.step_methods.model_failures`): a rejected error or a non-finite ``logp``
is a counted rejection, another error stops the sampler with a
:class:`~pymc_rnshmc.exceptions.ModelEvaluationError`.

:class:`ProcessEvaluator` hands the batch to ``concurrent.futures`` worker processes (the
standard library's pool: no scheduler of our own). Each worker unpickles the exact model once,
with its compiled functions, and keeps it; a request carries only the position. The results do
not depend on the number of workers: each evaluation is a function of its position.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
from collections.abc import Sequence
from typing import Any, Protocol

import cloudpickle
import numpy as np

from pymc_rnshmc._checks import check_positive_integer
from pymc_rnshmc.hmc.corrections import Evaluation

__all__ = ["Evaluator", "InProcessEvaluator", "ProcessEvaluator", "evaluate_exactly"]

Request = tuple[Any, np.ndarray, bool]
"""``(exact_model, position, gradient)``: a chain's exact model, where, with the gradient?"""


class Evaluator(Protocol):
    """Evaluates one round's exact ``logp`` (and gradients) of all chains, in order."""

    def evaluate(self, requests: Sequence[Request]) -> list[Evaluation]: ...


def evaluate_exactly(exact_model, position: np.ndarray, gradient: bool) -> Evaluation:
    """The exact model at ``position``: ``logp``, and ``grad U`` if ``gradient``."""
    if not gradient:
        return Evaluation(position, exact_model.logp(position))
    potential, potential_gradient = exact_model.potential_and_gradient(position)
    return Evaluation(position, -potential, potential_gradient)


class InProcessEvaluator:
    """Evaluates a round's requests one after the other, in this process (the default)."""

    def evaluate(self, requests: Sequence[Request]) -> list[Evaluation]:
        return [evaluate_exactly(*request) for request in requests]


_WORKER_MODEL = {}
"""In a worker process: the exact model it unpickled, by the evaluator's token."""


def _install(token: str, payload: bytes) -> None:
    _WORKER_MODEL[token] = cloudpickle.loads(payload)


def _evaluate_in_worker(token: str, position: np.ndarray, gradient: bool):
    exact_model = _WORKER_MODEL[token]
    evaluation = evaluate_exactly(exact_model, position, gradient)
    return evaluation, exact_model.failures.take()


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

    Notes
    -----
    The pool starts at the first batch, with the first request's exact model (all chains of a
    population share its compiled functions), and stops with :meth:`close` or when the
    evaluator is garbage collected. For cheap models the round trip to a process costs more
    than the evaluation: keep the default in-process evaluator.
    """

    def __init__(self, workers: int = 2, context: str = "spawn") -> None:
        self.workers = check_positive_integer("workers", workers)
        self.context = context
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None
        self._token: str | None = None
        self._model_id: int | None = None

    def evaluate(self, requests: Sequence[Request]) -> list[Evaluation]:
        if not requests:
            return []
        self._start(requests[0][0])
        futures = [
            self._pool.submit(_evaluate_in_worker, self._token, np.asarray(position), gradient)
            for _, position, gradient in requests
        ]
        evaluations = []
        for (exact_model, _, _), future in zip(requests, futures):
            evaluation, (count, first) = future.result()  # a ModelEvaluationError re-raises
            exact_model.failures.add(count, first)
            evaluations.append(evaluation)
        return evaluations

    def _start(self, exact_model) -> None:
        """Start the pool for ``exact_model``'s compiled functions (once per model)."""
        key = id(exact_model.step_function)
        if self._pool is not None and self._model_id == key:
            return
        self.close()
        self._model_id, self._token = key, f"model-{key}"
        payload = cloudpickle.dumps(exact_model.for_another_chain())
        self._pool = concurrent.futures.ProcessPoolExecutor(
            max_workers=self.workers,
            mp_context=multiprocessing.get_context(self.context),
            initializer=_install,
            initargs=(self._token, payload),
        )

    def close(self) -> None:
        """Stop the worker processes."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        self._pool = None

    def __getstate__(self) -> dict:  # a step holding it is copied and pickled by PyMC
        return {"workers": self.workers, "context": self.context}

    def __setstate__(self, state: dict) -> None:
        self.__init__(**state)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass
