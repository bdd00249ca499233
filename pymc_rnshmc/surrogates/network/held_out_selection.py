"""Choosing a random network's width and ridge penalty on held-out training points.

The training points are chain states, so neighbours are correlated: the held-out set is made of
interleaved blocks of consecutive points (:func:`validation_mask`), which keeps a state and its
successors on one side of the split. The random features are nested (the first ``s`` units of a
drawn layer form the narrower layer), so widths are tried narrowest first and the search stops
where widening stops paying; one eigendecomposition per width gives the whole penalty path
(:func:`~pymc_rnshmc.surrogates.network.least_squares.ridge_path`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from pymc_rnshmc.surrogates.network.least_squares import penalty_grid, ridge_path

__all__ = [
    "LEARNED_ERROR",
    "NEGLIGIBLE_ERROR",
    "WIDENING_GAIN",
    "HeldOutChoice",
    "choose_on_held_out",
    "validation_mask",
]

NEGLIGIBLE_ERROR = 1e-4
"""A held-out mean squared error below this fraction of the spread (1 % relative) is negligible."""
LEARNED_ERROR = 1e-2
"""A held-out mean squared error below this fraction of the spread (10 % relative) is learned:
the width search may stop there (:data:`WIDENING_GAIN`). Poorer fits try every width: their
held-out error can stall between two widths and fall again at wider ones (a sum of sines in 4
dimensions, 200 points: 10.5, 10.7, 7.9, 6.8 at 25, 50, 100, 200 units)."""
WIDENING_GAIN = 0.1
"""A learned fit's width search stops at the first wider width that lowers the held-out error by
less than this share of the best narrower one's."""


class HeldOutChoice(NamedTuple):
    """A width and penalty chosen on held-out points, and how well the best fit did there.

    ``lowest`` is the lowest held-out criterion over every width and penalty tried (mean
    squared gradient error plus value error over ``d``; without gradients, the value error);
    the errors are those of the choice (``gradient_mse`` NaN without gradients).
    """

    lowest: float
    width: int
    relative_penalty: float
    gradient_mse: float
    value_mse: float


def validation_mask(n_points: int, fraction: float) -> np.ndarray:
    """Hold out every ``round(1 / fraction)``-th block of consecutive points."""
    mask = np.zeros(n_points, dtype=bool)
    if fraction <= 0 or n_points < 10:
        return mask
    period = max(2, round(1.0 / fraction))
    block = max(1, n_points // (10 * period))
    mask[(np.arange(n_points) // block) % period == period - 1] = True
    return mask


def choose_on_held_out(
    layer,
    whitened: np.ndarray,
    features: np.ndarray,
    values: np.ndarray,
    gradients: np.ndarray | None,
    held_out: np.ndarray,
    spread: float,
    normal_equations: Callable,
    widths: list[int],
    penalty: float | None = None,
    tried: tuple[HeldOutChoice, ...] = (),
) -> HeldOutChoice | None:
    """Choose the number of hidden units and the penalty of ``layer`` on held-out points.

    The narrowest of ``widths`` wins whose held-out error is within 10 % of the best, or
    negligible anyway (below ``NEGLIGIBLE_ERROR`` times ``spread``, the held-out spread of the
    exact gradients, or the variance of the held-out potentials without gradients): every
    leapfrog step pays for each unit. Widths are tried narrowest first, and the search stops
    once the error is negligible, or once it is learned (:data:`LEARNED_ERROR`) and a wider
    width gains less than 10 % on the narrower ones (:data:`WIDENING_GAIN`): a wider one would
    then not be chosen unless the error fell again after a plateau.
    Among penalties, the largest within 1 % of the best error (the smoother fit on ties).
    ``penalty`` fixes the relative penalty instead of searching ``1e-10 .. 10``.
    ``normal_equations(layer, whitened, features, values, gradients)`` returns the Gram matrix
    and projection of the fit. ``tried`` are the choices of narrower widths already made (the
    search goes on from them). ``None`` if every penalty gave a non-finite error.
    """
    results = list(tried)
    for width in widths:
        result = _width_result(
            layer.subset(width),
            whitened,
            features[:, :width],
            values,
            gradients,
            held_out,
            normal_equations,
            penalty,
        )
        if result is None:
            continue
        gains = not results or result.lowest < (1 - WIDENING_GAIN) * min(r.lowest for r in results)
        results.append(result)
        if result.lowest <= (NEGLIGIBLE_ERROR if gains else LEARNED_ERROR) * spread:
            break
    if not results:
        return None
    lowest = min(result.lowest for result in results)
    good_enough = max(1.1 * lowest, NEGLIGIBLE_ERROR * spread)
    chosen = next(result for result in results if result.lowest <= good_enough)
    return chosen._replace(lowest=lowest)


def _width_result(
    layer, whitened, features, values, gradients, held_out, normal_equations, penalty
) -> HeldOutChoice | None:
    """The best penalty of one width on the held-out points (``lowest``: its criterion)."""
    train = ~held_out
    train_gradients = None if gradients is None else gradients[train]
    gram, projection = normal_equations(
        layer, whitened[train], features[train], values[train], train_gradients
    )
    scale = float(np.mean(np.diag(gram))) or 1.0
    penalties = penalty_grid(gram) if penalty is None else np.array([penalty * scale])
    path = ridge_path(gram, projection, penalties)
    value_predictions = features[held_out] @ path
    value_predictions -= value_predictions.mean(axis=0)
    value_targets = values[held_out] - values[held_out].mean()
    value_errors = np.mean((value_predictions - value_targets[:, None]) ** 2, axis=0)
    if gradients is None:
        criterion = value_errors
        gradient_errors = np.full_like(value_errors, np.nan)
    else:
        predicted = layer.gradient_batch(whitened[held_out], path)
        residual = predicted - gradients[held_out][:, :, None]
        gradient_errors = np.mean(np.sum(residual**2, axis=1), axis=0)
        criterion = gradient_errors + value_errors / whitened.shape[1]
    criterion = np.where(np.isfinite(criterion), criterion, np.inf)
    if not np.any(np.isfinite(criterion)):
        return None
    best = np.flatnonzero(criterion <= 1.01 * np.min(criterion))[-1]
    return HeldOutChoice(
        float(criterion[best]),
        features.shape[1],
        float(penalties[best] / scale),
        float(gradient_errors[best]),
        float(value_errors[best]),
    )
