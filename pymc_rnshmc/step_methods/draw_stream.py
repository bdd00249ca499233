"""Pooled chains that need not wait for each other: exploring, and after tuning.

Pooled chains (:mod:`~pymc_rnshmc.step_methods.population`) go in lockstep where they share
what they change: after the first fit, one record, refits and one step-size adaptation, which
the chains must update in an order that does not depend on timing. Elsewhere lockstep only costs
time, each round the longest of its chains' exact work:

- **Exploring**, before the first fit, a chain's draw is its own NUTS's. The record and the
  Laplace approximation it finds are shared, but nothing reads them before the fit, so their
  writes wait and are made in lockstep order (round by round, chain by chain) once every chain
  has finished that round. Measured on 4 chains of a Gaussian (d = 5), the lockstep exploration
  cost 686 solves, against 480 for the busiest chain's own.
- **After tuning** the kernel is frozen, and a chain's draw depends on its own point, generator,
  explorer and failure count. A safety-net draw is a NUTS trajectory of a dozen solves or more,
  a surrogate move one: the lockstep kept rounds cost 1.9 times what the busiest chain itself
  evaluated.

:class:`DrawStream` keeps one task per chain on the evaluator's workers: when a chain's task is
back, its draw is finished and the next one begun and sent at once, whatever the other chains
are doing; finished draws wait in a queue per chain until PyMC's iteration takes them. A chain
runs ahead of the others up to the draws it has left in the stretch (the exploration's last
draw, or the kept draws), and never past them; if that number is unknown, no further than
PyMC's current iteration. Each chain makes the same calls in the same order as in lockstep, so
its draws are the same whatever the number of workers or how long each task took. A task lost
with a worker is sent again (the evaluator's ``recover``); an error or an interrupt drops the
tasks in flight.

Waiting is the evaluator's (``concurrent.futures.wait``, ``distributed.wait``); what is here is
the chains' bookkeeping around it, which no library knows.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pymc.blocking import RaveledVars

from pymc_rnshmc.exceptions import ModelEvaluationError
from pymc_rnshmc.step_methods.chain import BegunDraw, SurrogateChain
from pymc_rnshmc.step_methods.evaluators import (
    Streaming,
    send_draw,
    send_evaluation,
    take_draw,
    take_evaluation,
)

__all__ = ["DrawStream"]


@dataclass
class _Task:
    """A chain's draw waiting for its exact work on a worker."""

    chain: int
    begun: BegunDraw
    request: tuple
    started: float
    """``perf_counter`` when the draw was begun."""
    losses: int = 0
    """Times the task was lost with a worker (and sent again)."""

    @property
    def explorer_draw(self) -> bool:
        """An explorer's draw (a NUTS trajectory), else a surrogate move's ``logp``."""
        return self.begun.exact_phase is not None


class DrawStream:
    """Draws of pooled chains, each chain's next task sent as soon as its last is back.

    Parameters
    ----------
    chains : list of SurrogateChain
        The pool's chains, exploring or after tuning.
    rngs : list of numpy.random.Generator
        Each chain's generator.
    hooks : list
        Each chain's configuration hooks.
    positions : list of RaveledVars
        Each chain's current point.
    evaluator : Streaming
        Sends the tasks and waits for them.
    draws_left : int or None
        Draws each chain has still to make in the stretch; ``None`` if unknown (a chain then
        makes only the draw of PyMC's current iteration, begun when chain 0 is asked for it).
    finish : callable
        ``finish(index, begun, evaluation, exact_draw, started) -> (q_new, stats)``: the
        second half of chain ``index``'s draw, begun at ``perf_counter`` ``started``.
    tune : bool
        Tuning draws (the exploration's), or kept draws.
    """

    def __init__(
        self,
        chains: list[SurrogateChain],
        rngs: list,
        hooks: list,
        positions: list[RaveledVars],
        evaluator: Streaming,
        draws_left: int | None,
        finish: Callable,
        tune: bool = False,
    ) -> None:
        self.chains, self.rngs, self.hooks = chains, rngs, hooks
        self.tune = tune
        self.positions = list(positions)
        self.evaluator = evaluator
        self.finish = finish
        self.draws = draws_left
        self.made = [0] * len(chains)
        self.iteration = 0
        """PyMC's iterations of the stretch begun so far (counted at chain 0's call, the first of
        each)."""
        self.ready: list[deque] = [deque() for _ in chains]
        self.tasks: dict[Any, _Task] = {}

    def next_draw(self, index: int) -> tuple[RaveledVars, dict[str, Any]]:
        """Chain ``index``'s next draw; every chain goes on while it is waited for."""
        if index == 0:
            self.iteration += 1
        self._take_finished(wait=False)
        self._start_free_chains()
        while not self.ready[index]:
            if not self.tasks:
                raise RuntimeError(
                    "PooledSurrogate was asked for more draws than PyMC said it would take."
                )
            self._take_finished(wait=True)
            self._start_free_chains()
        return self.ready[index].popleft()

    def cancel(self) -> None:
        """Drop the tasks in flight (an interrupt or an error): their draws are not made."""
        for future in self.tasks:
            future.cancel()
        self.tasks.clear()

    # ----------------------------------------------------------------- the chains' tasks
    def _may_draw(self, index: int) -> bool:
        """Whether chain ``index`` may begin a draw: while it has draws left.

        With that number unknown, only the draw of PyMC's current iteration.
        """
        limit = self.iteration if self.draws is None else self.draws
        return self.made[index] < limit

    def _start_free_chains(self) -> None:
        """Begin the next draw of every chain that has no task in flight and may draw."""
        busy = {task.chain for task in self.tasks.values()}
        for index in range(len(self.chains)):
            while index not in busy and self._may_draw(index):
                if self._begin(index):
                    busy.add(index)

    def _begin(self, index: int) -> bool:
        """Begin chain ``index``'s draw and send its exact work; whether there was any.

        A draw without exact work (a delayed-acceptance proposal rejected on the surrogate)
        is finished here at once.
        """
        started = time.perf_counter()
        chain, rng = self.chains[index], self.rngs[index]
        begun = chain.begin(self.positions[index], self.tune, rng, self.hooks[index])
        if begun.exact_phase is not None:
            request = (chain, begun.q0, begun.exact_start, self.tune, rng)
            future = send_draw(self.evaluator.submit, request)
        elif begun.position_to_evaluate is not None:
            request = (chain.exact_model, begun.position_to_evaluate, begun.wants_gradient)
            future = send_evaluation(self.evaluator.submit, request)
        else:
            self._queue(index, self.finish(index, begun, None, None, started))
            return False
        self.tasks[future] = _Task(index, begun, request, started)
        return True

    def _take_finished(self, wait: bool) -> None:
        """Finish the draw of every chain whose task is back (first waiting for one)."""
        if not self.tasks:
            return
        tasks = self.tasks
        done = self.evaluator.first_done(set(tasks)) if wait else [f for f in tasks if f.done()]
        for future in done:
            task = tasks[future]
            try:
                result = future.result()
            except ModelEvaluationError as error:
                self.cancel()
                chain = self.chains[task.chain]
                stretch = "an exploring" if self.tune else "a kept"
                where = f"in {stretch} draw of chain {task.chain}"
                chain.log.locate(error, where, chain.failures.layout)
                raise
            except Exception as error:  # a worker lost: the evaluator may recover
                self._recover(error)
                return
            del tasks[future]
            self._queue(task.chain, self._finish(task, result))

    def _finish(self, task: _Task, result) -> tuple[RaveledVars, dict[str, Any]]:
        if task.explorer_draw:
            draw = take_draw(task.request, result)
            return self.finish(task.chain, task.begun, None, draw, task.started)
        evaluation = take_evaluation(task.request, result)
        return self.finish(task.chain, task.begun, evaluation, None, task.started)

    def _recover(self, error: Exception) -> None:
        """Send every task in flight again, if the evaluator recovers from ``error``.

        Every task in flight was lost with it; the evaluator is told the most times any of
        them was lost, so that a task that kills its worker each time stops the stream
        (the other chains' tasks keep coming back in between).
        """
        tasks = list(self.tasks.values())
        self.cancel()
        for task in tasks:
            task.losses += 1
        if not self.evaluator.recover(error, max(task.losses for task in tasks)):
            raise error
        for task in tasks:
            send = send_draw if task.explorer_draw else send_evaluation
            self.tasks[send(self.evaluator.submit, task.request)] = task

    def _queue(self, index: int, draw: tuple[RaveledVars, dict[str, Any]]) -> None:
        """Chain ``index``'s finished draw, ready for PyMC; the chain moves there."""
        self.positions[index] = draw[0]
        self.ready[index].append(draw)
        self.made[index] += 1

    @property
    def spent(self) -> bool:
        """Whether every chain has made and handed over all its draws of the stretch."""
        if self.draws is None:
            return False
        made = all(count == self.draws for count in self.made)
        return made and not self.tasks and not any(self.ready)
