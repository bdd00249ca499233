"""The exact model on the sampler's raveled vector.

The only module that touches PyMC's compiled functions. Everything else asks this object for
``logp``, ``(U, grad U)`` or ``U`` at many rows. It builds a logp-only function at its first call
(the end point of a surrogate draw needs no gradient, and a chain that never asks for it never pays
for its graph), reuses the step's joint logp-and-gradient function for the rest, casts every
position to the model's dtype, and hands a model that fails at a point (returns NaN or infinity,
raises, or runs past the step's ``time_limit``: :mod:`~pymc_rnshmc.step_methods.time_limit`) to
:class:`~pymc_rnshmc.step_methods.model_failures.ModelFailures`: a counted rejection (``logp =
-inf``) or a clear error. A model whose logp has no gradient (an ``Op`` without one, such as a
wrapped simulator) gets a logp-only object: :func:`has_gradient` tells.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import math
import time

import numpy as np
import pytensor.gradient

from pymc_rnshmc.exceptions import EvaluationTimeout
from pymc_rnshmc.hmc.corrections import Evaluation
from pymc_rnshmc.step_methods.model_failures import ModelFailures, ParameterLayout
from pymc_rnshmc.step_methods.options import compile_options
from pymc_rnshmc.step_methods.time_limit import TimeLimit

__all__ = ["ExactModel", "has_gradient"]

NO_GRADIENT_ERRORS = (NotImplementedError, pytensor.gradient.NullTypeGradError)
"""What building the gradient graph raises when an ``Op`` on the way has no gradient."""


def has_gradient(model, vars) -> bool:
    """Whether PyTensor can differentiate the model's logp with respect to ``vars``.

    The test PyMC applies when it assigns step methods: building the gradient graph raises
    ``NotImplementedError`` or ``NullTypeGradError`` when an ``Op`` on the way has no gradient.
    """
    try:
        pytensor.gradient.grad(model.logp(), list(vars), disconnected_inputs="ignore")
    except NO_GRADIENT_ERRORS:
        return False
    return True


def _trusting(function):
    """The compiled function of a PyMC ``ValueGradFunction``, set to skip input validation.

    The wrapper's ``trust_input`` is not forwarded to it; the sampler's inputs are always
    contiguous vectors of the right dtype.
    """
    function._pytensor_function.trust_input = True
    return function._pytensor_function


def _may_defer(joint_function, time_limit: float | None) -> bool:
    """Whether the logp-only function can wait for its first call (:class:`BuiltAtFirstCall`).

    Not where there is no joint function to take the dtype from, or under a time limit (whose
    worker compiles every function before the first evaluation).
    """
    return joint_function is not None and time_limit is None


class BuiltAtFirstCall:
    """A model's logp-only function, built and compiled at its first call.

    Building it rewrites the model's graph (about 0.1 s on a two-parameter posteriordb model,
    more on larger graphs) before compiling; a chain whose economy evaluates ``logp`` by the
    joint function (:func:`~pymc_rnshmc.step_methods.economy.logp_function_pays`) never needs
    it in the sampling process. Copies of the exact model (one a chain of a population) share
    one instance, so it is built once. A worker process builds and compiles it before its
    first task (:meth:`ExactModel.warm_up`), as it compiled it before.

    Parameters
    ----------
    build : callable
        Returns PyMC's ``ValueGradFunction`` of the logp alone (``compute_grads=False``).
    extras : dict, optional
        The shared variables that hold the values of the model's non-sampled variables now
        (the joint function's, which the step sets at every draw): the built function's own
        start from them, and :attr:`shared` is set with them from then on. Building the
        function eagerly for them cost 0.18 s of a 1.9 s call on the coal-mining change point
        (``benchmarks/user_models.py``).
    """

    def __init__(self, build, extras: dict | None = None) -> None:
        self._build = build
        self._extras = dict(extras or {})
        self._function = None
        self.shared: dict = {}
        """The built function's shared variables of the non-sampled variables (empty before)."""

    @property
    def built(self) -> bool:
        return self._function is not None

    def __call__(self, position: np.ndarray):
        if self._function is None:
            function = self._build()
            self.shared = dict(function._extra_vars_shared)
            for name, shared in self.shared.items():
                shared.set_value(self._extras[name].get_value(borrow=True), borrow=True)
            self._function = _trusting(function)
            self._build = self._extras = None  # no longer needed, and copies pickle without it
        return self._function(position)


def _compiled_logp(model, vars, gradient: bool, options: dict):
    """PyMC's joint logp-and-gradient function of ``vars``, or logp alone without gradients.

    ``options``: the step's keywords (``dtype``, ``initial_point``, ``compile_kwargs`` and
    ``pytensor.function``'s), as PyMC's NUTS takes them.
    """
    function = model.logp_dlogp_function(
        vars,
        compute_grads=gradient,
        dtype=options.get("dtype"),
        ravel_inputs=True,
        initial_point=options.get("initial_point"),
        **compile_options(options),
    )
    function.trust_input = True
    return function


class ExactModel:
    """``logp`` and ``grad logp`` of a PyMC model on the raveled vector of ``vars``.

    Variables of the model that the step does not sample are held in shared variables; call
    :meth:`set_extra_values` with the current point before evaluating, as PyMC does for the
    joint logp-and-gradient function.

    Parameters
    ----------
    model : pymc.Model
    vars : list
        Value variables in raveling order.
    initial_point : dict, optional
        Defines the shapes of the raveled vector; default ``model.initial_point()``.
    dtype : str, optional
        Floating-point type of the raveled vector; default ``pytensor.config.floatX``.
    logp_dlogp_function : pymc ValueGradFunction, optional
        The step's joint function (PyMC sets its extra variables); compiled here if not given.
    gradient : bool
        Whether the model's logp has a gradient; without, only :meth:`logp` and
        :meth:`evaluate` without the gradient work, and the joint function is never compiled.
    logp_function : pymc ValueGradFunction, optional
        A logp-only function of the same variables (``compute_grads=False``); if not given,
        built here, at its first call where it can wait (:class:`BuiltAtFirstCall`). A
        gradient-free step passes its own, which is one.
    reject_errors : tuple of exception types
        Errors of the model counted as rejections besides what PyMC's leapfrog rejects
        (:class:`~pymc_rnshmc.step_methods.model_failures.ModelFailures`).
    time_limit : float, optional
        Seconds after which an evaluation is abandoned and counted as a rejection
        (:mod:`~pymc_rnshmc.step_methods.time_limit`); ``None``: the compiled functions are
        called directly, with no limit and no overhead.
    """

    def __init__(
        self,
        model,
        vars,
        initial_point=None,
        dtype: str | None = None,
        logp_dlogp_function=None,
        gradient: bool = True,
        logp_function=None,
        reject_errors: tuple = (),
        time_limit: float | None = None,
    ) -> None:
        if initial_point is None:
            initial_point = model.initial_point()
        options = {"dtype": dtype, "ravel_inputs": True, "initial_point": initial_point}
        if logp_dlogp_function is None and gradient:
            logp_dlogp_function = model.logp_dlogp_function(vars, **options)
        deferred = logp_function is None and _may_defer(logp_dlogp_function, time_limit)
        if deferred:  # built later: with the joint function's dtype, whatever floatX is then
            options["dtype"] = str(logp_dlogp_function.dtype)
        build = functools.partial(model.logp_dlogp_function, vars, compute_grads=False, **options)
        if deferred:  # the joint function's shared variables hold the non-sampled values
            self._shared = dict(logp_dlogp_function._extra_vars_shared)
            deferred_logp = BuiltAtFirstCall(build, self._shared)
            self._compiled = [deferred_logp, logp_dlogp_function._pytensor_function]
            self.dtype = str(logp_dlogp_function.dtype)
        else:
            logp_function = build() if logp_function is None else logp_function
            self._compiled = [_trusting(logp_function)]
            if logp_dlogp_function is not None:
                self._compiled.append(logp_dlogp_function._pytensor_function)
            self._shared = dict(logp_function._extra_vars_shared)
            self.dtype = str(logp_function.dtype)
        self.has_gradient = bool(gradient)
        self.size = int(sum(np.size(initial_point[v.name]) for v in vars))
        layout = ParameterLayout.of(vars, initial_point)
        if time_limit is not None:  # the user's choice, as a listed error is
            reject_errors = (*reject_errors, EvaluationTimeout)
        self.failures = ModelFailures(layout, reject_errors)
        self._start = self.cast(np.concatenate([np.ravel(initial_point[n]) for n in layout.names]))
        self.time_limit = None if time_limit is None else TimeLimit(time_limit, self._compile)
        self._logp = self.limited(self._compiled[0])
        self._joint = self.limited(self._compiled[1]) if gradient else None
        self.logp_by_joint = False
        """Evaluate ``logp`` alone by the joint function (set by the chain where compiling the
        logp-only function would cost more than it saves)."""
        self.logp_function_ready = time_limit is not None
        """Whether the logp-only function has run in this process (compiled)."""
        self.compile_seconds = 0.0
        """The most a compilation of the joint function was measured to take here."""
        self.graph_seconds = 0.0
        """What building the joint function's graph took (measured by :meth:`compile`)."""

    def __getstate__(self) -> dict:
        """A copy for another process, where the functions compile again at their first call."""
        state = self.__dict__.copy()
        state["logp_function_ready"] = self.time_limit is not None
        return state

    def note_compile_seconds(self, seconds: float) -> None:
        """Remember a measured compilation of the joint function (kept for later chains)."""
        self.compile_seconds = max(self.compile_seconds, float(seconds))

    def logp_function_seconds(self) -> float:
        """What the logp-only function would cost before its first answer.

        Its compilation, taken as the joint function's measured one, and its graph's build,
        taken as the joint function's, where it is still to be built.
        """
        function = self._compiled[0]
        unbuilt = isinstance(function, BuiltAtFirstCall) and not function.built
        return self.compile_seconds + (self.graph_seconds if unbuilt else 0.0)

    @classmethod
    def compile(
        cls, model, vars, options: dict, *, reject_errors: tuple, time_limit: float | None
    ) -> ExactModel:
        """The exact model of a step: its compiled function, with or without the gradient.

        ``options``: the step's keywords (``dtype``, ``initial_point``, ``compile_kwargs`` and
        ``pytensor.function``'s), as PyMC's NUTS takes them. The step's function, which its
        NUTS shares, is kept as :attr:`step_function`.
        """
        started = time.perf_counter()
        try:  # PyMC builds the gradient graph once here; has_gradient would build it again
            function, gradient = _compiled_logp(model, vars, True, options), True
        except NO_GRADIENT_ERRORS:
            function, gradient = _compiled_logp(model, vars, False, options), False
        graph_seconds = time.perf_counter() - started
        exact_model = cls(
            model,
            vars,
            options.get("initial_point"),
            function.dtype,
            function if gradient else None,
            gradient=gradient,
            logp_function=None if gradient else function,
            reject_errors=reject_errors,
            time_limit=time_limit,
        )
        exact_model.step_function = function
        exact_model.graph_seconds = graph_seconds
        return exact_model

    @property
    def initial_position(self) -> np.ndarray:
        """The initial point as a raveled vector of the model's dtype."""
        return self._start

    def for_another_chain(self) -> ExactModel:
        """The same compiled model with its own failure count (one per chain of a population)."""
        other = copy.copy(self)
        other.failures = ModelFailures(self.failures.layout, self.failures.reject_errors)
        return other

    def limited(self, function):
        """``function`` under the time limit (:class:`TimeLimit`); itself without one.

        Every call of the model's compiled functions goes through this: the two held here, and
        PyMC's leapfrog function (wrapped by the step).
        """
        return function if self.time_limit is None else self.time_limit.wrap(function)

    def warm_up(self) -> None:
        """Compile the model's functions in this process now (a worker, before its tasks)."""
        if self.time_limit is None:
            self._compile()
        else:  # once per process: the time limit's first call would compile again
            self.time_limit.warm()

    def _compile(self) -> None:
        """Call each compiled function once at the initial point, without a time limit.

        PyTensor's Numba backend compiles a function at its first call in each process, in
        Python code that the time limit's signal would interrupt; this first call compiles it
        where the model should be quick. What the model does there is left to the sampler's own
        evaluations.
        """
        for function in self._compiled:
            with contextlib.suppress(Exception):
                function(self._start)

    def cast(self, position: np.ndarray) -> np.ndarray:
        """``position`` as a contiguous vector of the model's dtype (a copy only if needed)."""
        return np.ascontiguousarray(position, dtype=self.dtype)

    def set_extra_values(self, point: dict) -> None:
        """Copy the non-sampled variables of ``point`` into the logp-only function.

        Where it is still to be built, into the joint function's shared variables, which it
        will start from (PyMC's step sets them too).
        """
        deferred = self._compiled[0]
        later = deferred.shared if isinstance(deferred, BuiltAtFirstCall) else {}
        for shared_variables in (self._shared, later):
            for name, shared in shared_variables.items():
                shared.set_value(point[name], borrow=True)

    def extra_values(self) -> tuple:
        """Copies of the current non-sampled values (to tell whether a cached logp is stale)."""
        return tuple(np.array(shared.get_value(borrow=True)) for shared in self._shared.values())

    def extras_unchanged(self, values: tuple) -> bool:
        """Whether the non-sampled variables still hold ``values``."""
        return all(
            np.array_equal(old, shared.get_value(borrow=True))
            for old, shared in zip(values, self._shared.values(), strict=True)
        )

    def logp(self, position: np.ndarray) -> float:
        """Exact ``logp``; ``-inf``, counted, where it is not finite or raises a rejected error.

        Raises
        ------
        ModelEvaluationError
            The model raised an error the failure policy does not reject.
        """
        try:
            logp = self._logp_alone(self.cast(position))
        except Exception as error:
            self.failures.raised(position, error)
            return -np.inf
        logp = float(logp)
        if not math.isfinite(logp):
            self.failures.note_logp(position, logp)
            return -np.inf
        return logp

    def _logp_alone(self, position: np.ndarray):
        """The logp-only function's value, or the joint function's where it is preferred.

        Where the joint function raises (a gradient that fails where the value does not), the
        logp-only function decides, as it would have without the preference.
        """
        if self.logp_by_joint:
            try:
                return self._joint(position)[0]
            except Exception:  # the logp-only function tells what the model says
                pass
        self.logp_function_ready = True
        return self._logp(position)[0]

    def potential_and_gradient(self, position: np.ndarray) -> tuple[float, np.ndarray]:
        """Exact ``U = -logp`` and ``grad U`` in one call (``inf`` and NaN where it fails).

        Raises
        ------
        NotImplementedError
            The model has no gradient.
        ModelEvaluationError
            The model raised an error the failure policy does not reject.
        """
        if not self.has_gradient:
            raise NotImplementedError("The model's logp has no gradient.")
        try:
            logp, logp_gradient = self._joint(self.cast(position))
        except Exception as error:
            self.failures.raised(position, error)
            return np.inf, np.full(np.shape(position), np.nan)
        logp = float(logp)
        if not math.isfinite(logp):
            self.failures.note_logp(position, logp)
            return np.inf, np.full(np.shape(position), np.nan)
        return -logp, -np.asarray(logp_gradient, dtype=float)

    def evaluate(self, position: np.ndarray, gradient: bool = False) -> Evaluation:
        """The model at ``position`` as an ``Evaluation``: ``logp``, and ``grad U`` if asked."""
        if not gradient:
            return Evaluation(position, self.logp(position))
        potential, potential_gradient = self.potential_and_gradient(position)
        return Evaluation(position, -potential, potential_gradient)
