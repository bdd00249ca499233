"""Errors and warnings shared by every layer, and the exception groups the step layer catches."""

from __future__ import annotations

import numpy as np

__all__ = [
    "FIT_ERRORS",
    "EvaluationTimeout",
    "ModelEvaluationError",
    "ServedModelError",
    "ServedModelUnavailable",
    "SurrogateFitError",
    "SurrogateWarning",
]


class SurrogateFitError(RuntimeError):
    """The surrogate could not be fitted to the training data.

    Examples
    --------
    >>> import numpy as np
    >>> from pymc_rnshmc import RandomNetworkSurrogate, SurrogateFitError
    >>> try:
    ...     RandomNetworkSurrogate().fit(np.zeros((3, 2)), np.zeros(3))
    ... except SurrogateFitError as error:
    ...     print(error)
    3 finite training points in 2 dimensions; the surrogate needs at least 4.
    """


class SurrogateWarning(UserWarning):
    """The surrogate could not be used as configured; sampling stays exact.

    Examples
    --------
    Tuning too short for the exploration asked for:

    >>> import warnings
    >>> import pymc as pm
    >>> from pymc_rnshmc import RNSHMC, SurrogateWarning
    >>> with pm.Model(), warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always", SurrogateWarning)
    ...     x = pm.Normal("x", 1, 2, shape=2)
    ...     idata = pm.sample(
    ...         step=RNSHMC(exploration_steps=400), tune=300, draws=100, chains=1, random_seed=1,
    ...         progressbar=False, compute_convergence_checks=False,
    ...     )
    >>> [str(w.message).split(" (")[0] for w in caught if w.category is SurrogateWarning]
    ['Tuning ended before RNSHMC finished exploring']
    """


class ModelEvaluationError(RuntimeError):
    """The model's logp raised an error the sampler was not told to treat as a rejection.

    Attributes
    ----------
    parameters : dict
        The sampled (transformed) value variables where the model raised.
    where : str
        What the chain was doing, once the step has added it
        (``"in a draw of the exploration phase, draw 57 of the chain"``).
    draws : dict
        The chain's draws of the step's value variables so far, ``{name: (n, *shape)}``,
        tuning draws first; empty if the error did not pass through a step. For pooled chains
        (``chains > 0``) every chain's, ``{name: (chain, n, *shape)}``.
    tuning_draws : int
        How many of ``draws`` were tuning draws.
    chains : int
        The number of pooled chains whose draws ``draws`` holds; 0 for a single chain.

    Examples
    --------
    A model that raises (here PyTensor's ``Assert``) beyond ``x = 1``:

    >>> import pymc as pm
    >>> from pytensor.raise_op import Assert
    >>> from pymc_rnshmc import RNSHMC, ModelEvaluationError
    >>> with pm.Model():
    ...     x = pm.Normal("x", 0, 1)
    ...     below = pm.Potential("below", Assert("x must stay below 1")(0.0, x < 1))
    ...     try:
    ...         pm.sample(step=RNSHMC(), tune=300, draws=100, chains=1, random_seed=1,
    ...                   progressbar=False, compute_convergence_checks=False)
    ...     except ModelEvaluationError as error:
    ...         failure = error
    >>> print(str(failure).split(" at ")[0])
    The model's logp raised AssertionError: 'x must stay below 1'
    >>> bool(failure.parameters["x"] >= 1), failure.draws["x"].ndim
    (True, 1)
    """

    def __init__(self, what: str, advice: str = "", parameters: dict | None = None) -> None:
        super().__init__(what, advice)
        self.parameters = dict(parameters or {})
        self.where = ""
        self.draws: dict = {}
        self.tuning_draws = 0
        self.chains = 0

    def __str__(self) -> str:
        what, advice = self.args
        message = f"{what} ({self.where})." if self.where else f"{what}."
        if advice:
            message += f" {advice}"
        if self.draws and self.chains:
            n_draws = next(iter(self.draws.values())).shape[1]
            message += (
                f" The {self.chains} chains' {n_draws} draws so far ({self.tuning_draws} of "
                "them tuning) are in this error's `draws`, shaped (chain, draw, ...)."
            )
        elif self.draws:
            n_draws = len(next(iter(self.draws.values())))
            message += (
                f" The chain's {n_draws} draws so far ({self.tuning_draws} of them tuning) are "
                "in this error's `draws` (with cores > 1, PyMC raises a ParallelSamplingError "
                "whose `__cause__` is this error)."
            )
        return message


class EvaluationTimeout(TimeoutError):
    """An exact evaluation of the model ran past the step's ``time_limit`` and was abandoned.

    Raised inside the model by :mod:`~pymc_rnshmc.step_methods.time_limit` and turned by the
    step into a counted rejection (sample stat ``model_failures``); it reaches the user only if
    the model raises it itself without a time limit set.

    Attributes
    ----------
    seconds : float
        The time limit that was exceeded.

    Examples
    --------
    >>> from pymc_rnshmc import EvaluationTimeout
    >>> try:
    ...     raise EvaluationTimeout(30)
    ... except TimeoutError as error:
    ...     print(error, error.seconds)
    the evaluation exceeded time_limit = 30 s 30.0
    """

    def __init__(self, seconds: float) -> None:
        super().__init__(seconds)
        self.seconds = float(seconds)

    def __str__(self) -> str:
        return f"the evaluation exceeded time_limit = {self.seconds:g} s"


class ServedModelError(RuntimeError):
    """A served model (UM-Bridge) answered a request with an error: the model's own failure.

    The failing-model policy treats it as any error the model raises: sampling stops with a
    :class:`ModelEvaluationError` naming the parameters, unless the step lists this type in
    ``reject_errors``.

    Attributes
    ----------
    kind : str
        The error type the server gave (``"InvalidInput"``, ``"HTTP 500"``, ...).
    """

    def __init__(self, message: str, kind: str = "") -> None:
        super().__init__(message)
        self.kind = kind


class ServedModelUnavailable(ConnectionError):
    """A served model did not answer: refused connections, or no answer within the timeout.

    Not the model's answer at those parameters, so not a rejection, whatever ``reject_errors``
    lists: a server that is down would leave the chain rejecting for ever. Sampling stops with
    a :class:`ModelEvaluationError` that keeps the draws so far. (A step's ``time_limit``
    abandons a slow request first, as any slow evaluation: a counted rejection.)
    """


FIT_ERRORS = (SurrogateFitError, np.linalg.LinAlgError, ValueError, FloatingPointError)
"""Errors of a surrogate fit, or of choosing its dynamics: the step falls back, never crashes."""
