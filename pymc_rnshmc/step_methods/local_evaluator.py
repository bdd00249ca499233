"""The default evaluator of pooled chains: local worker processes, where the model pays for them.

:func:`~pymc_rnshmc.sample` runs its chains' exact work in ``cores`` local worker processes
(:class:`~pymc_rnshmc.step_methods.evaluators.ProcessEvaluator`) when the model is costly
enough for that to pay, and in this process otherwise. Sending a position to a worker and
back costs a fraction of a millisecond, and starting the workers a second or more (each
compiles the model): on a model whose ``logp`` costs microseconds, workers would make the call
slower. :func:`workers_pay` weighs the two on the model's cost measured at its initial point
when the population starts. The choice moves no draw: each task is a function of what it is
sent, wherever it runs (with ``weigh_costs=False``; with the default the chains' cost-weighing
choices read each task's measured seconds, the same wherever it ran, up to timing noise).
"""

from __future__ import annotations

import logging
import multiprocessing
import platform
import time
from collections.abc import Sequence
from dataclasses import dataclass

from pymc_rnshmc._checks import check_positive_integer
from pymc_rnshmc.hmc.corrections import Evaluation
from pymc_rnshmc.step_methods.evaluators import (
    DrawRequest,
    InProcessEvaluator,
    ProcessEvaluator,
    Request,
)
from pymc_rnshmc.step_methods.explorers import ExactDraw

__all__ = ["LocalEvaluator", "workers_pay"]

_log = logging.getLogger("pymc")

ROUND_TRIP_SECONDS = 5e-4
"""What a task's trip to a local worker and back adds, at most (0.16 ms measured with the
fork start method, 0.45 ms with spawn, on a model of microseconds; 2 workers, 4 tasks a batch,
AMD EPYC, 2 cores)."""
START_SECONDS = {"fork": 1.0, "spawn": 5.0, "forkserver": 5.0}
"""Starting the workers, before each compiles the model (0.5-1.7 s measured with fork, 4.5 s
with spawn and forkserver, which import PyMC afresh; same set-up)."""
MARGIN = 2.0
"""Workers are used where they save at least this many times what they cost: the saving
assumes every worker busy, which lockstep rounds of uneven work do not give."""
MEASURING_SECONDS = 1.0
"""The cost is measured over at most this long after the first call (at least one call)."""


def workers_pay(
    seconds: float,
    workers: int,
    evaluations: int,
    start_seconds: float,
    round_trip: float = ROUND_TRIP_SECONDS,
) -> bool:
    """Whether ``workers`` processes shorten a run of at least ``evaluations`` exact calls.

    In this process the calls take ``evaluations * seconds``; in the workers a share
    ``1 / workers`` of that, plus ``start_seconds`` and a ``round_trip`` per call. The workers
    must save :data:`MARGIN` times what they add.
    """
    if workers < 2 or not seconds > 0:
        return False
    saved = evaluations * seconds * (1 - 1 / workers)
    spent = start_seconds + evaluations * round_trip
    return saved >= MARGIN * spent


def measured_seconds(exact_model) -> tuple[float, float]:
    """``(first, each)``: seconds of the first evaluation at the initial point, and of one after.

    The first call compiles where the backend compiles at first use (Numba); ``each`` is the
    median of the calls (one to five) made in :data:`MEASURING_SECONDS` after it. With the
    gradient where the model has one: that is what the chains mostly ask for. Measured on a
    copy whose failures count nowhere.
    """
    model = exact_model.for_another_chain()
    position = model.initial_position
    started = time.perf_counter()
    model.evaluate(position, model.has_gradient)
    first = time.perf_counter() - started
    calls: list[float] = []
    while not calls or (sum(calls) < MEASURING_SECONDS and len(calls) < 5):
        started = time.perf_counter()
        model.evaluate(position, model.has_gradient)
        calls.append(time.perf_counter() - started)
    return first, sorted(calls)[len(calls) // 2]


@dataclass(frozen=True)
class Choice:
    """Where a run's exact work goes, and why, in one line."""

    workers: int
    reason: str


def choose(exact_model, workers: int, evaluations: int, context: str) -> Choice:
    """Worker processes if they pay for the model's measured cost (:func:`workers_pay`)."""
    if workers < 2:
        return Choice(1, "one worker at most (cores=1, or one chain)")
    try:
        first, each = measured_seconds(exact_model)
    except Exception as error:  # the chains' own evaluations will report it
        return Choice(1, f"the model failed at its initial point ({type(error).__name__})")
    compile_seconds = max(first - each, 0.0)
    start = START_SECONDS.get(context, max(START_SECONDS.values())) + compile_seconds
    cost = f"an exact evaluation costs {_milliseconds(each)}"
    if workers_pay(each, workers, evaluations, start):
        return Choice(workers, cost)
    return Choice(1, f"{cost}, too little for {workers} worker processes to pay")


def _default_start_method() -> str:
    """The start method PyMC's ``pm.sample`` would use, without fixing Python's default.

    PyMC's choice: ``fork`` on macOS with Apple silicon, ``forkserver`` on other Macs, and
    Python's default elsewhere (``fork`` on Linux up to Python 3.13, ``forkserver`` from 3.14;
    ``spawn`` on Windows).
    """
    if platform.system() == "Darwin":
        return "fork" if platform.processor() == "arm" else "forkserver"
    chosen = multiprocessing.get_start_method(allow_none=True)
    return chosen or multiprocessing.get_all_start_methods()[0]


def _milliseconds(seconds: float) -> str:
    return f"{1e3 * seconds:.3g} ms"


class LocalEvaluator:
    """Local worker processes where the model's cost pays for them, this process otherwise.

    The default evaluator of :func:`~pymc_rnshmc.sample`. When the population starts it
    measures the model's exact evaluation at the initial point and weighs ``workers``
    processes against it (:func:`workers_pay`, over at least ``evaluations`` calls); it says
    what it chose in one line of PyMC's log. Then it is a
    :class:`~pymc_rnshmc.step_methods.evaluators.ProcessEvaluator` or an
    :class:`~pymc_rnshmc.step_methods.evaluators.InProcessEvaluator`, with their behaviour
    (streamed draws, restarts after a worker dies). The choice moves no draw beyond timing
    noise (none with ``weigh_costs=False``). Workers that
    cannot load the model (a model that cannot be pickled) leave the work in this process,
    and the log says why.

    Parameters
    ----------
    workers : int
        Worker processes at most (``1``: always this process).
    evaluations : int
        The fewest exact evaluations the run makes: one per chain and draw, tuning included.
    context : str, optional
        The ``multiprocessing`` start method; default PyMC's for ``pm.sample(cores=n)``
        (``"fork"`` on Linux up to Python 3.13, where scripts need no
        ``if __name__ == "__main__":`` guard). With ``"spawn"`` or ``"forkserver"`` scripts
        need the guard, as for ``pm.sample(cores=n)``.

    Attributes
    ----------
    choice : Choice or None
        What the last :meth:`start` chose: ``choice.workers`` processes (``1``: this
        process), and why.

    References
    ----------
    .. [1] Python Software Foundation. ``concurrent.futures.ProcessPoolExecutor``.
       https://docs.python.org/3/library/concurrent.futures.html
    """

    def __init__(self, workers: int, evaluations: int, context: str | None = None) -> None:
        self.workers = check_positive_integer("workers", workers)
        self.evaluations = check_positive_integer("evaluations", evaluations)
        self.context = context or _default_start_method()
        self.choice: Choice | None = None
        self._chosen: InProcessEvaluator | ProcessEvaluator = InProcessEvaluator()

    def start(self, sampler) -> None:
        """Measure the model, choose where its work runs, and start that."""
        self.close()
        self.choice = choose(sampler.exact_model, self.workers, self.evaluations, self.context)
        if self.choice.workers > 1:
            self._chosen = ProcessEvaluator(self.choice.workers, context=self.context)
            where = f"{self.choice.workers} worker processes"
        else:
            self._chosen, where = InProcessEvaluator(), "this process"
        try:
            self._chosen.start(sampler)
        except Exception as error:  # e.g. a model that cannot be pickled for the workers
            self.close(kill=True)
            self._chosen, where = InProcessEvaluator(), "this process"
            self.choice = Choice(1, f"the worker processes could not load the model ({error!r})")
        _log.info(f"Exact evaluations in {where}: {self.choice.reason}.")

    def evaluate(self, requests: Sequence[Request]) -> list[Evaluation]:
        return self._chosen.evaluate(requests)

    def explore(self, requests: Sequence[DrawRequest]) -> list[ExactDraw]:
        return self._chosen.explore(requests)

    def __getattr__(self, name: str):
        """The chosen evaluator's streaming methods (``submit``, ``first_done``, ``recover``)."""
        chosen = self.__dict__.get("_chosen")
        if name in ("submit", "first_done", "recover") and chosen is not None:
            return getattr(chosen, name)
        raise AttributeError(name)

    def close(self, kill: bool = False) -> None:
        """Stop the worker processes, if any (with ``kill``, at once: after an interrupt)."""
        if isinstance(self.__dict__.get("_chosen"), ProcessEvaluator):
            self._chosen.close(kill=kill)
