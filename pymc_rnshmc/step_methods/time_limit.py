"""An optional time limit on one exact evaluation of the model (the samplers' ``time_limit``).

Hand-written on the standard library's ``signal`` module, because nothing else can interrupt a
Python computation running in its own process: a thread cannot be killed, a
``concurrent.futures`` timeout only stops waiting for the result, and a process per evaluation
would ship the model across for every call. ``signal.setitimer(signal.ITIMER_REAL, seconds)``
sends SIGALRM when the time is up, and a handler that raises
:class:`~pymc_rnshmc.exceptions.EvaluationTimeout` makes the main thread abandon the Python code
it is running, as Ctrl-C does. The step then counts the evaluation as a rejection
(:mod:`~pymc_rnshmc.step_methods.model_failures`).

What the mechanism can and cannot do:

* Only the main thread of the main interpreter can handle signals, and only where SIGALRM exists
  (not Windows). PyMC runs each chain in the main thread: of the process with ``cores=1``, of a
  worker process with ``cores > 1``. Elsewhere the limit is ignored, with one warning per step.
* Python runs a handler between bytecodes, so compiled code that does not call back into Python
  (a C or Fortran solver without Python callbacks, a PyTensor graph without a Python ``Op``)
  is interrupted only when it next runs Python code; its late result is then discarded.
* A model that catches the exception and carries on is not interrupted again, but whatever it
  returns is discarded as late.
* Each evaluation sets and restores the timer and the handler: four system calls. A timer that
  was already running (another time limit, ``pytest-timeout``) is paused during the evaluation
  and resumed with the time it had left; if it fell due meanwhile, it fires right after.

With ``time_limit=None`` none of this runs: the step calls the model's compiled functions
directly.
"""

from __future__ import annotations

import signal
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

from pymc_rnshmc.exceptions import EvaluationTimeout

__all__ = ["Deadline", "TimeLimit", "TimeLimited", "why_unenforceable"]

RESUME_AT_ONCE = 1e-6
"""Delay, in seconds, of a paused timer that fell due during the evaluation."""


def why_unenforceable() -> str | None:
    """Why a time limit cannot be enforced here, or ``None`` if it can."""
    if not (hasattr(signal, "SIGALRM") and hasattr(signal, "setitimer")):
        return "this platform has no SIGALRM"
    if threading.current_thread() is not threading.main_thread():
        return (
            "only the main thread can handle signals, and the model is evaluated in thread "
            f"{threading.current_thread().name!r}"
        )
    if signal.getsignal(signal.SIGALRM) is None:
        return "a SIGALRM handler installed outside Python is in place and could not be restored"
    return None


class Deadline:
    """A context manager that raises :class:`EvaluationTimeout` once ``seconds`` have passed.

    Main thread only (see :func:`why_unenforceable`). On every exit, normal, by an error or by
    ``KeyboardInterrupt``, it cancels its timer, puts the previous SIGALRM handler back and
    resumes a timer that was running before. The handler never raises while the deadline is
    being entered or left, where an exception would skip that cleanup: there it only marks
    the deadline as passed, and leaving raises once the cleanup is done. Leaving also
    raises if the deadline passed but the body finished anyway, or turned the timeout into
    another error: a late evaluation is abandoned whatever it returned.

    Parameters
    ----------
    seconds : float
        Positive time limit.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.passed = False
        self._previous_handler: Any = None
        self._previous_timer = (0.0, 0.0)
        self._start = 0.0

    def __enter__(self) -> Deadline:
        self._previous_handler = signal.signal(signal.SIGALRM, self._alarm)
        self._start = time.monotonic()
        self._previous_timer = signal.setitimer(signal.ITIMER_REAL, self.seconds)
        return self

    def __exit__(self, kind, error, traceback) -> bool:
        try:
            signal.setitimer(signal.ITIMER_REAL, 0)
        finally:
            signal.signal(signal.SIGALRM, self._previous_handler)
            self._resume_previous_timer()
        interrupted = kind is not None and not issubclass(kind, Exception)  # Ctrl-C: goes on
        if self.passed and not interrupted and not isinstance(error, EvaluationTimeout):
            raise EvaluationTimeout(self.seconds) from error
        return False

    def _alarm(self, signum, frame) -> None:
        self.passed = True
        if frame is not None and frame.f_code in _SETTING_UP:
            return  # entering or leaving: __exit__ raises after its cleanup
        raise EvaluationTimeout(self.seconds)

    def _resume_previous_timer(self) -> None:
        delay, interval = self._previous_timer
        if delay > 0:
            left = delay - (time.monotonic() - self._start)
            signal.setitimer(signal.ITIMER_REAL, max(left, RESUME_AT_ONCE), interval)


_SETTING_UP = frozenset(
    method.__code__
    for method in (Deadline.__enter__, Deadline.__exit__, Deadline._resume_previous_timer)
)
"""Code where the alarm must not raise: an exception there would leave the handler installed."""


class TimeLimit:
    """At most ``seconds`` for each call of the functions it wraps.

    Holds no handler or timer between calls, so a step holding it pickles. Where the limit
    cannot be enforced it warns once and calls the function without it.

    Parameters
    ----------
    seconds : float
        Positive time limit of one call.
    warm_up : callable, optional
        Called once without a limit before the first limited call in each process (a copy
        made by pickling calls it again): work that must not be interrupted, such as
        compiling the functions.
    """

    def __init__(self, seconds: float, warm_up: Callable[[], Any] | None = None) -> None:
        self.seconds = float(seconds)
        self.warm_up = warm_up
        self.warned = False
        self._warm = False

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_warm": False}  # another process compiles afresh

    def warm(self) -> None:
        """Run ``warm_up`` if it has not run in this process yet."""
        if not self._warm:
            self._warm = True
            if self.warm_up is not None:
                self.warm_up()

    def wrap(self, function: Callable) -> TimeLimited:
        """``function``, abandoned with :class:`EvaluationTimeout` after ``seconds``."""
        return TimeLimited(function, self)

    def call(self, function: Callable, *args) -> Any:
        """``function(*args)`` under the limit."""
        reason = why_unenforceable()
        if reason is None:
            self.warm()
            with Deadline(self.seconds):
                return function(*args)
        self._warn(reason)
        return function(*args)

    def _warn(self, reason: str) -> None:
        if self.warned:
            return
        self.warned = True
        warnings.warn(
            f"time_limit = {self.seconds:g} s is ignored: {reason}. The model is evaluated "
            "without a time limit.",
            UserWarning,
            stacklevel=4,
        )


class TimeLimited:
    """A function called under a :class:`TimeLimit`; called as the function is."""

    def __init__(self, function: Callable, limit: TimeLimit) -> None:
        self.function = function
        self.limit = limit

    def __call__(self, *args) -> Any:
        return self.limit.call(self.function, *args)
