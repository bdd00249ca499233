"""The random network surrogate of the potential energy ``U = -logp``.

``U~(q) = Q(z) + v . phi(z) + c`` with ``z`` the whitened position, ``Q`` an optional quadratic
fitted to exact gradients, or to the values for models without gradients
(:mod:`~pymc_rnshmc.surrogates.quadratic`), ``phi`` a random hidden layer
(:mod:`~pymc_rnshmc.surrogates.network.hidden_layers`) and ``v`` output weights from regularized
least squares on the residual values *and* gradients (paper section 3, Algorithm 2, extended
with gradient rows). The width, the penalty and the scale of the random weights are
chosen on interleaved held-out blocks of the training points
(:mod:`~pymc_rnshmc.surrogates.network.layer_choice`); this module fits the quadratic base and
the output weights, and evaluates the surrogate.

Only the gradient of the surrogate drives the dynamics; the exact Metropolis test never sees the
surrogate, so a poor fit costs acceptance, never correctness.
"""

from __future__ import annotations

import copy
import numbers
import time
from dataclasses import dataclass

import numpy as np

from pymc_rnshmc._checks import check_positive_integer, check_positive_number
from pymc_rnshmc.exceptions import SurrogateFitError
from pymc_rnshmc.surrogates.ceiling import Ceiling
from pymc_rnshmc.surrogates.network.activations import get_activation
from pymc_rnshmc.surrogates.network.curvature import RidgeForm
from pymc_rnshmc.surrogates.network.hidden_layers import AdditiveLayer, RadialLayer
from pymc_rnshmc.surrogates.network.layer_choice import MAX_DEFAULT_HIDDEN, LayerChoice, LayerFit
from pymc_rnshmc.surrogates.network.least_squares import ridge_solve
from pymc_rnshmc.surrogates.network.online_network import OnlineNetworkLearner
from pymc_rnshmc.surrogates.quadratic import QuadraticPotential
from pymc_rnshmc.surrogates.training import finite_rows
from pymc_rnshmc.surrogates.whitening import Whitening

__all__ = ["FitReport", "RandomNetworkSurrogate"]


@dataclass(frozen=True)
class FitReport:
    """What a surrogate fit used and how well it predicts held-out training points.

    Attributes
    ----------
    n_points : int
        Training points used (after dropping non-finite ones).
    n_hidden : int
        Hidden units.
    penalty : float
        Ridge penalty of the final fit.
    gradient_error : float
        Held-out root-mean-square gradient error relative to the spread of the exact gradients,
        in whitened coordinates (0 is perfect, 1 is as good as a constant). NaN without gradients.
    potential_error : float
        Held-out root-mean-square error of the potential after removing the mean offset.
    seconds : float
        Wall time of the fit.
    weight_scale : float
        Scale of the hidden weights (or radial widths) used.
    value_error : float
        Held-out ``potential_error`` relative to the standard deviation of the held-out
        potentials (0 is perfect, 1 is as good as a constant). NaN with gradients.
    with_gradients : bool
        Whether the fit had gradients.

    Examples
    --------
    >>> import numpy as np
    >>> from pymc_rnshmc import RandomNetworkSurrogate
    >>> rng = np.random.default_rng(1)
    >>> positions = rng.normal(size=(200, 2))
    >>> potentials = 0.5 * np.sum(positions**2, axis=1) + np.sin(positions[:, 0])
    >>> gradients = positions + np.column_stack([np.cos(positions[:, 0]), np.zeros(200)])
    >>> report = RandomNetworkSurrogate().fit(positions, potentials, gradients, rng=rng).report
    >>> report.n_points, report.with_gradients
    (200, True)
    >>> bool(report.held_out_error < 0.05)  # the relative held-out gradient error
    True
    """

    n_points: int
    n_hidden: int
    penalty: float
    gradient_error: float
    potential_error: float
    seconds: float
    weight_scale: float = 1.0
    value_error: float = np.nan
    with_gradients: bool = True

    @property
    def held_out_error(self) -> float:
        """The relative held-out error of what the fit was given.

        ``gradient_error`` for a fit with gradients, ``value_error`` for one to values alone;
        NaN when no points were held out.
        """
        return self.gradient_error if self.with_gradients else self.value_error

    def summary(self) -> str:
        """One phrase for the step's log."""
        kind = "gradient" if self.with_gradients else "potential"
        error = self.held_out_error
        measured = f"{error:.1%}" if np.isfinite(error) else "not measured"
        return (
            f" in {self.seconds:.2g} s ({self.n_hidden} hidden units, weight scale "
            f"{self.weight_scale:g}, held-out {kind} error {measured})"
        )


class RandomNetworkSurrogate:
    """Random network surrogate of a potential energy, fitted by least squares.

    Parameters
    ----------
    n_hidden : int, optional
        Number of hidden units ``s``. Default: chosen on held-out training points among
        nested widths up to a quarter of the least-squares rows ``n (d + 1)`` with gradients,
        up to twice the number of points ``n`` without (at most 2000 either way): the narrowest
        within 10 % of the best error.
    hidden_units : {"additive", "radial"}
        Node type (paper section 3.2).
    activation : str
        Activation of additive nodes: ``"softplus"`` (default), ``"tanh"``, ``"logistic"`` or
        ``"cosine"``.
    quadratic : bool
        Fit a quadratic base to the exact gradients (to the exact potentials when no gradients
        are given) and the network to the residual. The fit then needs at least ``d + 2``
        training points, else 3: ``d + 1`` determine the base's linear part, and the ridge
        penalty of its curvature copes with fewer points than its ``d (d + 1) / 2`` entries.
    penalty : float, optional
        Fixed ridge penalty, relative to the mean diagonal of the normal equations. Default:
        chosen by held-out error over ``1e-10 .. 10``.
    gradient_weight : float
        Weight of gradient rows relative to value rows (in whitened coordinates).
    validation_fraction : float
        Fraction of training points held out to choose the width, the penalty and the scale.
    weight_scale : float, optional
        Scale of the random hidden weights (additive) or widths (radial) in whitened units.
        Default: for additive nodes, the scale among 1, 0.3 and 0.1 with the lowest held-out
        error (the same random directions at every scale; the search stops early once the
        error is negligible); 1 for radial nodes, and when no points are held out (fewer
        than 10, or ``validation_fraction=0``).
    max_hidden : int
        Largest number of hidden units the automatic width choice considers.
    ceiling : bool
        Keep the potential under a ceiling beyond the training points, so that extrapolation
        cannot build a wall in front of posterior mass its data never reached
        (:mod:`~pymc_rnshmc.surrogates.ceiling`). It lowered the banana's walls from 40-765 to
        3-13 nats. Off by default: on today's defaults (safety net on) it gained no
        correctness in the trust battery and cost a median 1.7 times the whole call
        (``docs/reliability.md``, "The ceiling, measured"); it helped a heavy-tailed Student-t.

    References
    ----------
    .. [1] Zhang, C., Shahbaba, B., & Zhao, H. (2017). Hamiltonian Monte Carlo acceleration
       using surrogate functions with random bases. Statistics and Computing, 27(6), 1473-1490.
    .. [2] Huang, G.-B., Zhu, Q.-Y., & Siew, C.-K. (2006). Extreme learning machine: theory and
       applications. Neurocomputing, 70, 489-501.

    Examples
    --------
    A sampler takes one configured, ``RNSHMC(surrogate=RandomNetworkSurrogate(...))``, and
    fits it itself; fitted here by hand to ``U(q) = |q|^2 / 2 + sin(q_0)``:

    >>> import numpy as np
    >>> from pymc_rnshmc import RandomNetworkSurrogate
    >>> rng = np.random.default_rng(1)
    >>> positions = rng.normal(size=(200, 2))
    >>> potentials = 0.5 * np.sum(positions**2, axis=1) + np.sin(positions[:, 0])
    >>> gradients = positions + np.column_stack([np.cos(positions[:, 0]), np.zeros(200)])
    >>> surrogate = RandomNetworkSurrogate().fit(positions, potentials, gradients, rng=rng)
    >>> q = np.array([0.5, -0.3])
    >>> bool(np.allclose(surrogate.gradient(q), q + [np.cos(0.5), 0.0], atol=0.01))
    True
    """

    defined_everywhere = True
    is_gradient_field = True

    def __init__(
        self,
        n_hidden: int | None = None,
        hidden_units: str = "additive",
        activation: str = "softplus",
        quadratic: bool = True,
        penalty: float | None = None,
        gradient_weight: float = 1.0,
        validation_fraction: float = 0.2,
        weight_scale: float | None = None,
        max_hidden: int = MAX_DEFAULT_HIDDEN,
        ceiling: bool = False,
    ) -> None:
        n_hidden = check_positive_integer("n_hidden", n_hidden, allow_none=True)
        if hidden_units not in ("additive", "radial"):
            raise ValueError(f"hidden_units must be 'additive' or 'radial', got {hidden_units!r}.")
        if hidden_units == "additive":
            get_activation(activation)
        if penalty is not None:
            if not isinstance(penalty, numbers.Real) or not (np.isfinite(penalty) and penalty >= 0):
                raise ValueError(f"penalty must be a non-negative number or None, got {penalty!r}.")
        if not isinstance(gradient_weight, numbers.Real) or not (
            np.isfinite(gradient_weight) and gradient_weight >= 0
        ):
            raise ValueError(f"gradient_weight must be non-negative, got {gradient_weight!r}.")
        if not isinstance(validation_fraction, numbers.Real) or not 0 <= validation_fraction < 1:
            raise ValueError(f"validation_fraction must be in [0, 1), got {validation_fraction!r}.")
        weight_scale = check_positive_number("weight_scale", weight_scale, allow_none=True)
        self.max_hidden = check_positive_integer("max_hidden", max_hidden)
        self.n_hidden = n_hidden
        self.hidden_units = hidden_units
        self.activation = activation
        self.quadratic = quadratic
        self.penalty = penalty
        self.gradient_weight = float(gradient_weight)
        self.validation_fraction = float(validation_fraction)
        self.weight_scale = None if weight_scale is None else float(weight_scale)
        self.whitening: Whitening | None = None
        self.quadratic_part: QuadraticPotential | None = None
        self.layer: AdditiveLayer | RadialLayer | None = None
        self.coefficients: np.ndarray | None = None
        self.offset = 0.0
        self.ridge_penalty = np.nan
        self.report: FitReport | None = None
        self._folded = None
        self.gaussian_base: tuple[np.ndarray, np.ndarray] | None = None
        self.ceiling = bool(ceiling)
        self.ceiling_part: Ceiling | None = None

    def with_gaussian_base(
        self, mean: np.ndarray, covariance: np.ndarray
    ) -> RandomNetworkSurrogate:
        """An unfitted copy whose fits to values use ``N(mean, covariance)`` as their base.

        For models without gradients, with the Laplace approximation found from values: the
        base is then not fitted to the values, and the network, 50 units unless ``n_hidden``
        says otherwise, only corrects it. On the elliptic PDE without gradients (d = 20,
        1000 tuning draws) this gave a min bulk / tail ESS of 624 / 342 per 1000 draws, where a
        base fitted to the values, or 100 or more units on the Laplace base, fitted valleys
        beyond the training points that sent every trajectory to energy errors of 1e4-1e6.
        Fits to gradients ignore it.
        """
        surrogate = copy.deepcopy(self)
        surrogate.gaussian_base = (np.array(mean, dtype=float), np.array(covariance, dtype=float))
        return surrogate

    @property
    def is_fitted(self) -> bool:
        """Whether :meth:`fit` has succeeded."""
        return self.coefficients is not None

    def fit(
        self,
        positions: np.ndarray,
        potentials: np.ndarray,
        gradients: np.ndarray | None = None,
        rng: np.random.Generator | None = None,
    ) -> RandomNetworkSurrogate:
        """Fit to exact potentials (and gradients) at training positions.

        Parameters
        ----------
        positions : ndarray, shape (n, d)
        potentials : ndarray, shape (n,)
            ``U = -logp`` at the positions.
        gradients : ndarray, shape (n, d), optional
            ``grad U`` at the positions.
        rng : numpy.random.Generator, optional
            Source of the random hidden layer.

        Raises
        ------
        SurrogateFitError
            Too few finite training points, or the least-squares problem produced non-finite
            weights.
        """
        start = time.perf_counter()
        rng = np.random.default_rng(rng)
        self.ceiling_part = None
        positions, potentials, gradients = self._finite_rows(positions, potentials, gradients)
        whitening = Whitening.from_positions(positions)
        whitened = whitening.to_whitened(positions)
        quadratic_part, values, residual_gradients = self._residual_targets(
            whitening, whitened, potentials, gradients
        )
        choice = self._layer_choice()
        chosen = choice.hidden_layer(
            rng, whitening, whitened, potentials, gradients, values, residual_gradients
        )
        coefficients, ridge_penalty = _output_weights(
            choice, chosen, whitened, values, residual_gradients
        )
        self.whitening = whitening
        self.quadratic_part = quadratic_part
        self.layer = chosen.layer
        self.coefficients = coefficients
        self.ridge_penalty = ridge_penalty
        self.offset = 0.0
        self.offset = float(np.mean(potentials - self.potential(positions)))
        self._fold_whitening()
        if self.ceiling:
            self.ceiling_part = Ceiling.above(whitening, potentials)
        self.report = _fit_report(
            chosen, positions.shape[0], time.perf_counter() - start, gradients is not None
        )
        return self

    def _finite_rows(
        self,
        positions: np.ndarray,
        potentials: np.ndarray,
        gradients: np.ndarray | None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """Keep the training rows whose position, potential and gradient are all finite.

        Returns
        -------
        positions : ndarray, shape (m, d)
        potentials : ndarray, shape (m,)
        gradients : ndarray, shape (m, d) or None
            The finite rows, as float arrays (``gradients`` None if none were given).

        Raises
        ------
        ValueError
            ``positions`` and ``potentials`` have different numbers of rows.
        SurrogateFitError
            Fewer finite rows than the fit needs.
        """
        positions, potentials, gradients = finite_rows(positions, potentials, gradients)
        n_points, dim = positions.shape
        minimum = dim + 2 if self.quadratic else 3
        if n_points < minimum:
            raise SurrogateFitError(
                f"{n_points} finite training points in {dim} dimensions; the surrogate needs "
                f"at least {minimum}."
            )
        return positions, potentials, gradients

    def _residual_targets(
        self,
        whitening: Whitening,
        whitened: np.ndarray,
        potentials: np.ndarray,
        gradients: np.ndarray | None,
    ) -> tuple[QuadraticPotential | None, np.ndarray, np.ndarray | None]:
        """Fit the optional quadratic base and return what the network is left to fit.

        Returns
        -------
        quadratic_part : QuadraticPotential or None
            The quadratic fitted to the whitened gradients, or to the potentials without
            gradients (None when ``quadratic`` is off).
        values : ndarray, shape (n,)
            Potentials minus the quadratic.
        gradients : ndarray, shape (n, d) or None
            Whitened gradients minus the quadratic's (None without gradients).
        """
        values = potentials.copy()
        residual_gradients = None
        quadratic_part = None
        if gradients is not None:
            residual_gradients = whitening.gradient_to_whitened(gradients)
            if self.quadratic:
                quadratic_part = QuadraticPotential.fit(whitened, residual_gradients)
                values -= quadratic_part.potential(whitened)
                residual_gradients = residual_gradients - quadratic_part.gradient(whitened)
        elif self.gaussian_base is not None:
            quadratic_part = self._whitened_gaussian_base(whitening)
            values -= quadratic_part.potential(whitened)
        elif self.quadratic:
            quadratic_part = QuadraticPotential.fit_to_values(whitened, potentials)
            values -= quadratic_part.potential(whitened)
        return quadratic_part, values, residual_gradients

    def _layer_choice(self) -> LayerChoice:
        return LayerChoice(
            self.hidden_units,
            self.activation,
            self.n_hidden,
            self.max_hidden,
            self.penalty,
            self.weight_scale,
            self.gradient_weight,
            self.validation_fraction,
            self.quadratic,
            self.gaussian_base is not None,
        )

    def _whitened_gaussian_base(self, whitening: Whitening) -> QuadraticPotential:
        mean, covariance = self.gaussian_base
        inverse = whitening.inverse_factor
        return QuadraticPotential.from_gaussian(
            whitening.to_whitened(mean), inverse @ covariance @ inverse.T
        )

    def online_estimator(
        self,
        positions: np.ndarray,
        potentials: np.ndarray,
        gradients: np.ndarray | None = None,
    ) -> OnlineNetworkLearner:
        """An online learner of the output weights, starting from this fit's training data.

        Pass the points given to :meth:`fit`; see
        :class:`~pymc_rnshmc.surrogates.network.online_network.OnlineNetworkLearner`.
        """
        return OnlineNetworkLearner(self, positions, potentials, gradients)

    def potential(self, positions: np.ndarray) -> np.ndarray | float:
        """Surrogate potential at one point ``(d,)`` (a float) or at rows ``(n, d)``."""
        value = self._network_potential(positions)
        if self.ceiling_part is not None:
            (value,) = self.ceiling_part.soft_minimum(positions, value)
        return float(value) if np.ndim(value) == 0 else value

    def _network_potential(self, positions: np.ndarray) -> np.ndarray | float:
        """The fitted network's potential, without the ceiling."""
        whitened = self.whitening.to_whitened(positions)
        value = self.layer.features(whitened) @ self.coefficients + self.offset
        if self.quadratic_part is not None:
            value = value + self.quadratic_part.potential(whitened)
        return float(value) if np.ndim(value) == 0 else value

    def _fold_whitening(self) -> None:
        """Precompute the gradient of additive layers directly in the sampler's coordinates.

        ``W z + beta = W_q q + beta_q`` with ``W_q = W L^-1``, and the quadratic's gradient is
        ``H_q (q - c) + b_q``: a leapfrog step then costs two ``s x d`` products, the
        activation's derivative in place, and no whitening.
        """
        self._folded = None
        if not isinstance(self.layer, AdditiveLayer):
            return
        inverse = self.whitening.inverse_factor
        weights = np.ascontiguousarray(self.layer.weights @ inverse)
        biases = np.ascontiguousarray(self.layer.biases - weights @ self.whitening.centre)
        hessian = linear = None
        if self.quadratic_part is not None:
            hessian = inverse.T @ self.quadratic_part.hessian @ inverse
            hessian = np.ascontiguousarray(0.5 * (hessian + hessian.T))
            linear = np.ascontiguousarray(inverse.T @ self.quadratic_part.linear)
        self._folded = (weights, biases, hessian, linear)

    def ridge_form(self) -> RidgeForm:
        """The fitted network in the sampler's coordinates, to third order (Riemannian dynamics).

        Raises
        ------
        ValueError
            If the surrogate is not fitted, its units are not additive, or its activation has
            no third derivative.
        """
        folded = getattr(self, "_folded", None)
        if folded is None or self.layer._activation.higher_derivatives is None:
            raise ValueError(
                "The surrogate's curvature needs a fitted network of additive units with a "
                "smooth activation (hidden_units='additive')."
            )
        weights, biases, hessian, linear = folded
        dim = weights.shape[1]
        return RidgeForm(
            weights,
            biases,
            np.asarray(self.coefficients, dtype=float),
            self.layer._activation,
            np.zeros((dim, dim)) if hessian is None else hessian,
            np.zeros(dim) if linear is None else linear,
            self.whitening.centre,
            float(self.offset),
        )

    def potential_and_gradient(self, position: np.ndarray) -> tuple[float, np.ndarray]:
        """``U~`` and its gradient at one point ``(d,)``, sharing the hidden layer's work."""
        value, gradient = self._network_potential_and_gradient(position)
        if self.ceiling_part is None:
            return value, gradient
        value, gradient = self.ceiling_part.soft_minimum(position, value, gradient)
        return float(value), gradient

    def _network_potential_and_gradient(self, position: np.ndarray) -> tuple[float, np.ndarray]:
        """The fitted network's potential and gradient, without the ceiling."""
        folded = getattr(self, "_folded", None)
        if folded is None or np.ndim(position) != 1:
            return float(self._network_potential(position)), self._network_gradient(position)
        weights, biases, hessian, linear = folded
        preactivation = weights @ position
        preactivation += biases
        values, slopes = self.layer._activation.both(preactivation)
        value = float(values @ self.coefficients) + self.offset
        slopes *= self.coefficients
        gradient = slopes @ weights
        if hessian is not None:
            shifted = position - self.whitening.centre
            curvature = shifted @ hessian
            value += float(shifted @ (0.5 * curvature + linear))
            gradient += curvature
            gradient += linear
        return value, gradient

    def gradient(self, position: np.ndarray) -> np.ndarray:
        """Gradient of the surrogate potential at one point ``(d,)`` or at rows ``(n, d)``."""
        ceiling = getattr(self, "ceiling_part", None)
        if ceiling is None:
            return self._network_gradient(position)
        if np.ndim(position) == 1:
            return self.potential_and_gradient(position)[1]
        value = self._network_potential(position)
        return ceiling.soft_minimum(position, value, self._network_gradient(position))[1]

    def _network_gradient(self, position: np.ndarray) -> np.ndarray:
        """The fitted network's gradient, without the ceiling."""
        folded = getattr(self, "_folded", None)
        if folded is not None:
            weights, biases, hessian, linear = folded
            if position.ndim == 1:  # matrix-vector product in the faster orientation
                slopes = weights @ position
            else:
                slopes = position @ weights.T
            slopes += biases
            slopes = self.layer._activation.derivative(slopes, out=slopes)
            slopes *= self.coefficients
            gradient = slopes @ weights
            if hessian is not None:
                gradient += (position - self.whitening.centre) @ hessian
                gradient += linear
            return gradient
        whitening = self.whitening
        whitened = (position - whitening.centre) @ whitening.inverse_factor.T
        gradient = self.layer.gradient(whitened, self.coefficients)
        if self.quadratic_part is not None:
            gradient = gradient + self.quadratic_part.gradient(whitened)
        return gradient @ whitening.inverse_factor


def _output_weights(
    choice: LayerChoice,
    chosen: LayerFit,
    whitened: np.ndarray,
    values: np.ndarray,
    gradients: np.ndarray | None,
) -> tuple[np.ndarray, float]:
    """Solve the ridge problem of the chosen layer on every training point.

    Returns
    -------
    coefficients : ndarray, shape (s,)
        Output weights of the hidden units.
    ridge_penalty : float
        Absolute penalty used: the relative penalty times the mean diagonal of the Gram
        matrix.

    Raises
    ------
    SurrogateFitError
        The output weights are not all finite.
    """
    gram, projection = choice.normal_equations(
        chosen.layer, whitened, chosen.features, values, gradients
    )
    scale = float(np.mean(np.diag(gram))) or 1.0
    ridge_penalty = chosen.relative_penalty * scale
    coefficients = ridge_solve(gram, projection, ridge_penalty)
    if not np.all(np.isfinite(coefficients)):
        raise SurrogateFitError("The least-squares fit produced non-finite output weights.")
    return coefficients, ridge_penalty


def _fit_report(chosen: LayerFit, n_points: int, seconds: float, with_gradients: bool) -> FitReport:
    """The :class:`FitReport` of a fit with ``chosen`` on ``n_points`` points in ``seconds``."""
    return FitReport(
        n_points=n_points,
        n_hidden=chosen.n_hidden,
        penalty=chosen.relative_penalty,
        gradient_error=chosen.gradient_error,
        potential_error=chosen.potential_error,
        seconds=seconds,
        weight_scale=chosen.weight_scale,
        value_error=chosen.value_error,
        with_gradients=with_gradients,
    )
