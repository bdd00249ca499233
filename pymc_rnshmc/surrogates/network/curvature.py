r"""The random network surrogate's curvature and its derivatives, in closed form.

A fitted additive network with its quadratic base is, in the sampler's coordinates,

.. math:: \tilde U(q) = \sum_k c_k\, a(w_k \cdot q + b_k) + \tfrac12 (q - m)^T B (q - m)
          + l^T (q - m) + \text{const},

so its Hessian is :math:`W^T \operatorname{diag}(c \circ a''(z)) W + B` and the derivative of
the Hessian along :math:`q_i` is :math:`\sum_k c_k a'''(z_k) W_{ki}\, w_k w_k^T`: one vector of
``s`` numbers, :math:`t = c \circ a'''(z)`, carries every third derivative. Riemannian dynamics
never form the ``d x d x d`` tensor; they contract it with vectors through ``W`` and ``t``
(:mod:`pymc_rnshmc.hmc.riemannian_metric`). That is what makes RNS-RMHMC cheap next to exact
RMHMC, whose metric derivatives need the model's third derivatives at every step.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from pymc_rnshmc.surrogates.network.activations import Activation

__all__ = ["LocalCurvature", "RidgeForm"]


class LocalCurvature(NamedTuple):
    """The surrogate at one point, to third order.

    Attributes
    ----------
    potential : float
        ``U~(q)``.
    gradient : ndarray, shape (d,)
    hessian : ndarray, shape (d, d) or (d,)
        The Hessian, or only its diagonal.
    weights : ndarray, shape (s, d)
        The units' weights ``W`` in the sampler's coordinates.
    third : ndarray, shape (s,)
        ``t = c * a'''(z)``: ``d Hessian / d q_i = sum_k t_k W_ki w_k w_k^T``.
    """

    potential: float
    gradient: np.ndarray
    hessian: np.ndarray
    weights: np.ndarray
    third: np.ndarray


class RidgeForm(NamedTuple):
    """A fitted additive random network in the sampler's coordinates (see the module).

    Attributes
    ----------
    weights : ndarray, shape (s, d)
    biases : ndarray, shape (s,)
    coefficients : ndarray, shape (s,)
    activation : Activation
        Must provide ``higher_derivatives``.
    base_hessian : ndarray, shape (d, d)
        ``B`` (zeros without a quadratic base).
    base_linear : ndarray, shape (d,)
    centre : ndarray, shape (d,)
    offset : float
    """

    weights: np.ndarray
    biases: np.ndarray
    coefficients: np.ndarray
    activation: Activation
    base_hessian: np.ndarray
    base_linear: np.ndarray
    centre: np.ndarray
    offset: float

    def potential(self, position: np.ndarray) -> float:
        """``U~`` at one point."""
        shifted = position - self.centre
        units = self.activation.value(self.weights @ position + self.biases)
        quadratic = shifted @ (0.5 * (self.base_hessian @ shifted) + self.base_linear)
        return float(units @ self.coefficients + quadratic + self.offset)

    def at(self, position: np.ndarray, diagonal: bool = False) -> LocalCurvature:
        """Potential, gradient, Hessian (or its diagonal) and third-derivative weights at a point.

        The full Hessian costs ``O(s d^2)``, its diagonal ``O(s d)``.
        """
        weights = self.weights
        preactivation = weights @ position + self.biases
        first, second, third = self.activation.higher_derivatives(preactivation)
        coefficients = self.coefficients
        shifted = position - self.centre
        base_slope = self.base_hessian @ shifted
        gradient = (first * coefficients) @ weights + base_slope + self.base_linear
        scaled_second = second * coefficients
        if diagonal:
            hessian = scaled_second @ (weights * weights) + np.diag(self.base_hessian)
        else:
            hessian = (weights.T * scaled_second) @ weights + self.base_hessian
            hessian = 0.5 * (hessian + hessian.T)
        # :meth:`potential` from the same preactivation and base slope (no second W q)
        units = self.activation.value(preactivation)
        quadratic = shifted @ (0.5 * base_slope + self.base_linear)
        potential = float(units @ coefficients + quadratic + self.offset)
        return LocalCurvature(potential, gradient, hessian, weights, third * coefficients)
