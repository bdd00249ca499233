"""Choosing a random network's width and ridge penalty on held-out training points.

The training points are chain states, so neighbours are correlated: the held-out set is made of
interleaved blocks of consecutive points (:func:`validation_mask`), which keeps a state and its
successors on one side of the split. The random features are nested (the first ``s`` units of a
drawn layer form the narrower layer), so one Gram matrix of the training part serves every width,
and one eigendecomposition per width gives the whole penalty path
(:func:`~pymc_rnshmc.surrogates.network.least_squares.ridge_path`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from pymc_rnshmc.surrogates.network.least_squares import penalty_grid, ridge_path

__all__ = ["NEGLIGIBLE_ERROR", "HeldOutChoice", "choose_on_held_out", "validation_mask"]

NEGLIGIBLE_ERROR = 1e-4
"""A held-out mean squared error below this fraction of the spread (1 % relative) is negligible."""


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
) -> HeldOutChoice | None:
    """Choose the number of hidden units and the penalty of ``layer`` on held-out points.

    The narrowest of ``widths`` wins whose held-out error is within 10 % of the best, or
    negligible anyway (below ``NEGLIGIBLE_ERROR`` times ``spread``, the held-out spread of the
    exact gradients, or the variance of the held-out potentials without gradients): every
    leapfrog step pays for each unit. Among penalties, the largest
    within 1 % of the best error (the smoother fit on ties). ``penalty`` fixes the relative
    penalty instead of searching ``1e-10 .. 10``. ``normal_equations(layer, whitened,
    features, values, gradients)`` returns the Gram matrix and projection of the fit.
    ``None`` if every penalty gave a non-finite error.
    """
    train = ~held_out
    train_gradients = None if gradients is None else gradients[train]
    gram, projection = normal_equations(
        layer, whitened[train], features[train], values[train], train_gradients
    )
    value_targets = values[held_out] - values[held_out].mean()
    results = []
    for width in widths:
        sub_gram = gram[:width, :width]
        scale = float(np.mean(np.diag(sub_gram))) or 1.0
        penalties = penalty_grid(sub_gram) if penalty is None else np.array([penalty * scale])
        path = ridge_path(sub_gram, projection[:width], penalties)
        value_predictions = features[held_out][:, :width] @ path
        value_predictions -= value_predictions.mean(axis=0)
        value_errors = np.mean((value_predictions - value_targets[:, None]) ** 2, axis=0)
        if gradients is None:
            criterion = value_errors
            gradient_errors = np.full_like(value_errors, np.nan)
        else:
            predicted = layer.subset(width).gradient_batch(whitened[held_out], path)
            residual = predicted - gradients[held_out][:, :, None]
            gradient_errors = np.mean(np.sum(residual**2, axis=1), axis=0)
            criterion = gradient_errors + value_errors / whitened.shape[1]
        criterion = np.where(np.isfinite(criterion), criterion, np.inf)
        if not np.any(np.isfinite(criterion)):
            continue
        best = np.flatnonzero(criterion <= 1.01 * np.min(criterion))[-1]
        results.append(
            (
                float(criterion[best]),
                width,
                float(penalties[best] / scale),
                float(gradient_errors[best]),
                float(value_errors[best]),
            )
        )
    if not results:
        return None
    lowest = min(result[0] for result in results)
    good_enough = max(1.1 * lowest, NEGLIGIBLE_ERROR * spread)
    chosen = next(result for result in results if result[0] <= good_enough)
    return HeldOutChoice(lowest, *chosen[1:])
