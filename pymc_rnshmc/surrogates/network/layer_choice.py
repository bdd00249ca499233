"""How a random network's hidden layer is drawn and chosen: its width, ridge penalty and scale.

A fit draws one random hidden layer (:mod:`~pymc_rnshmc.surrogates.network.hidden_layers`) and
chooses on held-out training points the width among nested widths of that layer, the relative
ridge penalty and the scale of its random weights; for one scale,
:func:`~pymc_rnshmc.surrogates.network.held_out_selection.choose_on_held_out` chooses width and
penalty. What the user fixed (``n_hidden``, ``penalty``, ``weight_scale``) is not chosen.
:class:`LayerChoice` holds the options the choice depends on;
:class:`~pymc_rnshmc.surrogates.network.random_network.RandomNetworkSurrogate` then fits the
output weights of the layer it returns on every training point.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from pymc_rnshmc.exceptions import SurrogateFitError
from pymc_rnshmc.surrogates.network.held_out_selection import (
    NEGLIGIBLE_ERROR,
    HeldOutChoice,
    choose_on_held_out,
    validation_mask,
)
from pymc_rnshmc.surrogates.network.hidden_layers import (
    AdditiveLayer,
    RadialLayer,
    make_hidden_layer,
)
from pymc_rnshmc.surrogates.quadratic import QuadraticPotential
from pymc_rnshmc.surrogates.whitening import Whitening

__all__ = ["MAX_DEFAULT_HIDDEN", "LayerChoice", "LayerFit", "default_n_hidden", "screened_widths"]

MAX_DEFAULT_HIDDEN = 2000
MIN_DEFAULT_HIDDEN = 50
SCREENING_WIDTH = 400
"""Widest layer below which weight scales are compared on every width."""
WEIGHT_SCALES = (1.0, 0.3, 0.1)
"""Scales of the additive layer's random weights tried, in this order, when none is given.

Smaller weights make smoother, nearly polynomial features (a softplus of a small argument is
close to its low-order Taylor terms; with enough units they span the cubics): they fit the
smooth misfit of a PDE or ODE forward model far better, while rough or funnel-like potentials
prefer the unit scale. The search stops at the first scale whose held-out error is negligible.
"""


def default_n_hidden(n_points: int, dim: int, with_gradients: bool) -> int:
    """Hidden units for ``n_points`` training points, between 50 and 2000.

    With gradients, a quarter of the least-squares rows ``n (d + 1)``. Without, two units per
    point: the ridge penalty and the held-out choice among narrower widths keep so wide a layer
    from overfitting, and a quarter of the rows was far too few. On a 4-d banana-shaped, skewed
    target (400 exact draws) the relative potential error on test draws (the 90 % of lowest
    ``U``) fell from 0.44 to 0.09, and from 0.13 to 0.12 on the elliptic PDE (d = 20, 2000 chain
    draws), for a fit of 2.5 s instead of 0.2 s.
    """
    if with_gradients:
        return int(np.clip(n_points * (dim + 1) // 4, MIN_DEFAULT_HIDDEN, MAX_DEFAULT_HIDDEN))
    return int(np.clip(2 * n_points, MIN_DEFAULT_HIDDEN, MAX_DEFAULT_HIDDEN))


def screened_widths(widths: list[int]) -> list[int]:
    """The widths on which weight scales are compared: up to half the widest.

    The penalty path of a width costs an eigendecomposition, cubic in the width, so comparing
    the scales without the widest is about eight times cheaper. On the elliptic PDE (d = 20,
    600 training points, widths up to 2000) the scales rank the same at 1000 units as at 2000
    (0.1 best), and a fit took 1.9 s instead of 4.7 s with the same held-out error. Widths of
    a few hundred units are compared whole: their eigendecompositions cost little.
    """
    if widths[-1] < SCREENING_WIDTH:
        return widths
    return [width for width in widths if 2 * width <= widths[-1]] or widths[:1]


class LayerFit(NamedTuple):
    """The hidden layer a fit uses, how it was chosen, and its held-out errors (NaN if none)."""

    layer: AdditiveLayer | RadialLayer
    features: np.ndarray
    n_hidden: int
    relative_penalty: float
    weight_scale: float
    gradient_error: float = np.nan
    potential_error: float = np.nan
    value_error: float = np.nan


class _ScaleTrial(NamedTuple):
    """The held-out choice of width and penalty at one weight scale of the drawn layer."""

    choice: HeldOutChoice
    weight_scale: float
    layer: AdditiveLayer | RadialLayer
    features: np.ndarray

    def cut(self, spread: float, with_gradients: bool) -> LayerFit:
        """Return the layer and features cut to the chosen width, with the held-out errors.

        The relative errors are relative to ``spread`` (see :func:`_held_out_spread`): the
        gradient error with gradients, else the value error; the other one is NaN.
        """
        n_hidden = self.choice.width
        layer = self.layer.subset(n_hidden)
        features = self.features[:, :n_hidden]
        potential_error = float(np.sqrt(self.choice.value_mse))
        gradient_error = value_error = np.nan
        if with_gradients:
            gradient_error = float(np.sqrt(self.choice.gradient_mse / max(spread, 1e-300)))
        else:
            value_error = float(np.sqrt(self.choice.value_mse / max(spread, 1e-300)))
        return LayerFit(
            layer,
            features,
            n_hidden,
            self.choice.relative_penalty,
            self.weight_scale,
            gradient_error,
            potential_error,
            value_error,
        )


def _held_out_spread(
    whitening: Whitening,
    potentials: np.ndarray,
    gradients: np.ndarray | None,
    held_out: np.ndarray,
) -> float:
    """Return the scale of the held-out targets that errors are compared with.

    Returns
    -------
    float
        The mean squared deviation of the held-out whitened gradients from their mean, or the
        variance of the held-out potentials without gradients.
    """
    if gradients is not None:
        exact = whitening.gradient_to_whitened(gradients[held_out])
        return np.mean(np.sum((exact - exact.mean(axis=0)) ** 2, axis=1))
    return float(np.var(potentials[held_out]))


def _values_without_held_out_base(
    whitened: np.ndarray, potentials: np.ndarray, held_out: np.ndarray
) -> np.ndarray:
    """The potentials minus a quadratic fitted to the values of the training part alone.

    A quadratic fitted to the values of every point has about as many unknowns as a chain
    explores points (231 in d = 20), so it nearly interpolates the held-out points and their
    error looks several times smaller than it is (on the elliptic PDE with 250 points, a
    held-out relative error of 0.05 for a true one of 0.26). The width, the penalty and the
    scale are therefore chosen, and the held-out error measured, with this base instead; a
    fit to gradients has ``d`` rows per point and the same base everywhere.
    """
    base = QuadraticPotential.fit_to_values(whitened[~held_out], potentials[~held_out])
    return potentials - base.potential(whitened)


@dataclass(frozen=True)
class LayerChoice:
    """The options a hidden layer is drawn and chosen with (those of the surrogate's fit).

    ``n_hidden``, ``penalty`` and ``weight_scale`` are chosen when ``None``; ``quadratic`` and
    ``gaussian_base`` say what base the network's fit to values has (they change the widths
    and the held-out targets, see :meth:`hidden_layer`).
    """

    hidden_units: str
    activation: str
    n_hidden: int | None
    max_hidden: int
    penalty: float | None
    weight_scale: float | None
    gradient_weight: float
    validation_fraction: float
    quadratic: bool
    gaussian_base: bool

    def hidden_layer(
        self,
        rng: np.random.Generator,
        whitening: Whitening,
        whitened: np.ndarray,
        potentials: np.ndarray,
        gradients: np.ndarray | None,
        values: np.ndarray,
        residual_gradients: np.ndarray | None,
    ) -> LayerFit:
        """Draw the hidden layer, choosing it on held-out points unless everything is fixed.

        Without held-out points, or with the width, the penalty and the scale all given, one
        layer is drawn at the first candidate scale with the given penalty (default ``1e-6``).

        Returns
        -------
        LayerFit
            The layer, its features at ``whitened``, and the width, penalty and scale used.
        """
        n_points, dim = whitened.shape
        n_hidden = self.n_hidden or min(
            default_n_hidden(n_points, dim, gradients is not None), self.max_hidden
        )
        if self.n_hidden is None and gradients is None and self.gaussian_base:
            n_hidden = min(MIN_DEFAULT_HIDDEN, self.max_hidden)
        held_out = validation_mask(n_points, self.validation_fraction)
        scales = self.candidate_scales()
        if held_out.any() and (self.penalty is None or self.n_hidden is None or len(scales) > 1):
            spread = _held_out_spread(whitening, potentials, gradients, held_out)
            if gradients is None and self.quadratic and not self.gaussian_base:
                values = _values_without_held_out_base(whitened, potentials, held_out)
            return self._choose_layer(
                rng, n_hidden, scales, whitened, values, residual_gradients, held_out, spread
            )
        weight_scale = scales[0]
        layer = make_hidden_layer(
            self.hidden_units, rng, n_hidden, whitened, self.activation, weight_scale
        )
        features = layer.features(whitened)
        relative_penalty = 1e-6 if self.penalty is None else self.penalty
        return LayerFit(layer, features, n_hidden, relative_penalty, weight_scale)

    def _choose_layer(
        self,
        rng: np.random.Generator,
        n_hidden: int,
        scales: tuple[float, ...],
        whitened: np.ndarray,
        values: np.ndarray,
        gradients: np.ndarray | None,
        held_out: np.ndarray,
        spread: float,
    ) -> LayerFit:
        """Draw a layer and choose its width, penalty and weight scale on held-out points.

        The scales are tried in order on the same random directions and biases, compared on
        the widths up to half the widest (see :func:`screened_widths`); the search stops at the
        first scale whose held-out error is negligible. If the best scale chose the widest
        screened width, its error was still falling, and unless it is negligible the search
        goes on to the wider widths.

        Returns
        -------
        LayerFit
            The best scale's layer and features cut to the chosen width, with its held-out
            errors.

        Raises
        ------
        SurrogateFitError
            No scale gave a finite held-out error.
        """
        drawn = make_hidden_layer(
            self.hidden_units, rng, n_hidden, whitened, self.activation, scales[0]
        )
        widths = self._candidate_widths(n_hidden)
        screened = screened_widths(widths) if len(scales) > 1 else widths
        best = None
        for weight_scale in scales:
            # The same random directions and biases at every scale: only the scale differs.
            layer = drawn if weight_scale == scales[0] else drawn.scaled(weight_scale)
            features = layer.features(whitened)
            try:
                choice = self._select_width(
                    layer, whitened, features, values, gradients, held_out, spread, screened
                )
            except (SurrogateFitError, np.linalg.LinAlgError):
                continue  # another scale may still fit
            if best is None or choice.lowest < best.choice.lowest:
                best = _ScaleTrial(choice, weight_scale, layer, features)
            if choice.lowest <= NEGLIGIBLE_ERROR * spread:
                break
        if best is None:
            raise SurrogateFitError("Every penalty gave a non-finite held-out error.")
        still_falling = best.choice.width == screened[-1] < widths[-1]
        if still_falling and best.choice.lowest > NEGLIGIBLE_ERROR * spread:
            best = self._widen(best, whitened, values, gradients, held_out, spread, widths)
        return best.cut(spread, with_gradients=gradients is not None)

    def _widen(self, trial, whitened, values, gradients, held_out, spread, widths) -> _ScaleTrial:
        """The search of the scale's widths beyond the screened choice, which it goes on from.

        Called only when the widest screened width was chosen: the error was still falling, and
        that width holds the lowest error so far. The screened choice if the wider ones fail.
        """
        wider = [width for width in widths if width > trial.choice.width]
        try:
            choice = self._select_width(
                trial.layer,
                whitened,
                trial.features,
                values,
                gradients,
                held_out,
                spread,
                wider,
                tried=(trial.choice,),
            )
        except (SurrogateFitError, np.linalg.LinAlgError):
            return trial
        return trial._replace(choice=choice)

    def candidate_scales(self) -> tuple[float, ...]:
        """The weight scales to try: the given one, else :data:`WEIGHT_SCALES` (additive)."""
        if self.weight_scale is not None:
            return (self.weight_scale,)
        if self.hidden_units == "additive":
            return WEIGHT_SCALES
        return (1.0,)

    def normal_equations(self, layer, whitened, features, values, gradients):
        """The centred Gram matrix and projection of the value rows (and gradient rows)."""
        centred = features - features.mean(axis=0)
        gram = centred.T @ centred
        projection = centred.T @ (values - values.mean())
        if gradients is not None and self.gradient_weight > 0:
            gram += self.gradient_weight * layer.gradient_gram(whitened)
            projection += self.gradient_weight * layer.gradient_projection(whitened, gradients)
        return gram, projection

    def _candidate_widths(self, widest: int) -> list[int]:
        """Nested widths to choose among: a given ``n_hidden`` alone, else eighths to the whole."""
        if self.n_hidden is not None:
            return [widest]
        return sorted({max(min(widest, MIN_DEFAULT_HIDDEN), widest // k) for k in (8, 4, 2, 1)})

    def _select_width(
        self, layer, whitened, features, values, gradients, held_out, spread, widths, tried=()
    ):
        """Held-out choice of width and penalty for one drawn layer (see ``choose_on_held_out``)."""
        choice = choose_on_held_out(
            layer,
            whitened,
            features,
            values,
            gradients,
            held_out,
            spread,
            self.normal_equations,
            widths,
            self.penalty,
            tried,
        )
        if choice is None:
            raise SurrogateFitError("Every penalty gave a non-finite held-out error.")
        return choice
