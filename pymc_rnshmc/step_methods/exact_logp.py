"""The model's exact log density alone (no gradient), compiled once for end-point evaluations."""

from __future__ import annotations

import numpy as np

from pymc_rnshmc.exceptions import MODEL_ERRORS

__all__ = ["ExactLogp"]


class ExactLogp:
    """``logp(q)`` of the model on the raveled vector of ``vars``.

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
    dtype : str
        Floating-point type of the raveled vector.
    """

    def __init__(self, model, vars, initial_point, dtype: str) -> None:
        if initial_point is None:
            initial_point = model.initial_point()
        function = model.logp_dlogp_function(
            vars,
            dtype=dtype,
            ravel_inputs=True,
            compute_grads=False,
            initial_point=initial_point,
        )
        self._compiled = function._pytensor_function
        # The wrapper's trust_input is not forwarded; set it on the compiled function so a call
        # skips input validation (inputs are always contiguous float vectors of the right size).
        self._compiled.trust_input = True
        self._shared = dict(function._extra_vars_shared)
        self.dtype = dtype
        self.size = int(sum(np.size(initial_point[v.name]) for v in vars))

    def set_extra_values(self, point: dict) -> None:
        """Copy the non-sampled variables of ``point`` into the compiled function."""
        for name, shared in self._shared.items():
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

    def __call__(self, position: np.ndarray) -> float:
        """Exact ``logp``; ``-inf`` if the model raises a numerical error at ``position``."""
        try:
            (logp,) = self._compiled(np.ascontiguousarray(position, dtype=self.dtype))
        except MODEL_ERRORS:
            return -np.inf
        logp = float(logp)
        return logp if not np.isnan(logp) else -np.inf
