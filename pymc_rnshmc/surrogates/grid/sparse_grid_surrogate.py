"""A sparse-grid surrogate of the potential over a box around the posterior's bulk.

Sparse-grid HMC (Zhang, Shahbaba & Zhao, section 3.4): inside the domain of interest
(:mod:`~pymc_rnshmc.surrogates.grid.domain`) the potential ``U`` is replaced by a Smolyak
interpolant precomputed on a sparse grid (:mod:`~pymc_rnshmc.surrogates.grid.sparse_grid`);
outside it the exact potential is used (their eq. 3.11).

The interpolated function is the residual ``U(q) - |z|^2 / 2`` when ``quadratic_base`` is on: for
a Laplace box ``|z|^2 / 2`` is the Laplace approximation's own potential, so the piecewise-linear
basis only has to capture the departure from it, which is smaller and smoother than ``U``.
"""

from __future__ import annotations

import numba
import numpy as np

from pymc_rnshmc.surrogates.grid.domain import BoxSurrogate
from pymc_rnshmc.surrogates.grid.sparse_grid import SparseGrid, adaptive_interpolant, evaluate_point

__all__ = ["SparseGridSurrogate"]


@numba.njit(cache=True, nogil=True)
def _gradient_in_box(position, centre, inverse_factor, radius, quadratic, grid_arrays, scratch):
    """Gradient in the sampler's coordinates at one point; NaN outside the box.

    The whole leapfrog-step path (whitening, box test, interpolant, chain rule back) in one
    compiled call: done with numpy calls it cost ten times the interpolant itself.
    """
    active, offsets, surpluses, n_levels = grid_arrays
    dim = position.shape[0]
    whitened = inverse_factor @ (position - centre)
    result = np.full(dim, np.nan)
    unit = (whitened + radius) / (2.0 * radius)
    out = np.empty(dim + 1)
    if evaluate_point(unit, active, offsets, surpluses, len(offsets), n_levels, True, out, scratch):
        gradient = out[:dim] / (2.0 * radius)
        if quadratic:
            gradient += whitened
        result = gradient @ inverse_factor
    return result


@numba.njit(cache=True, nogil=True)
def _extended_gradient_rows(positions, centre, inverse_factor, radius, quadratic, grid_arrays):
    """Gradients of the simulation extension at rows (the trajectory simulations' hot path).

    Outside the box: the interpolant's slope at the nearest point of the box, plus the
    quadratic's gradient when ``quadratic``.
    """
    active, offsets, surpluses, n_levels = grid_arrays
    n_rows, dim = positions.shape
    scratch = np.empty((3 * dim + 1, max(n_levels, dim + 1)))
    out = np.empty(dim + 1)
    gradients = np.empty((n_rows, dim))
    for row in range(n_rows):
        whitened = inverse_factor @ (positions[row] - centre)
        unit = np.minimum(np.maximum((whitened + radius) / (2.0 * radius), 0.0), 1.0)
        if evaluate_point(
            unit, active, offsets, surpluses, len(offsets), n_levels, True, out, scratch
        ):
            gradient = out[:dim] / (2.0 * radius)
            if quadratic:
                gradient += whitened
            gradients[row] = gradient @ inverse_factor
        else:
            gradients[row] = np.nan
    return gradients


class SparseGridSurrogate(BoxSurrogate):
    """Sparse-grid interpolant of the potential over a box, NaN outside it.

    Parameters
    ----------
    level : int
        Smolyak level (``level >= 1``; ``2 d + 1`` points at level 1).
    mass, domain, exact_potential, exact_potential_and_gradient
        As for :class:`~pymc_rnshmc.surrogates.grid.domain.BoxSurrogate`.
    quadratic_base : bool
        Interpolate ``U - |z|^2 / 2`` instead of ``U``.
    refine_to : int, optional
        Instead of the isotropic grid of ``level``, refine adaptively from level 1 where the
        hierarchical surpluses are largest, up to this many nodes
        (:func:`~pymc_rnshmc.surrogates.grid.sparse_grid.adaptive_interpolant`).

    References
    ----------
    .. [1] Zhang, C., Shahbaba, B., & Zhao, H. (2017). Precomputing strategy for Hamiltonian
       Monte Carlo method based on regularity in parameter space. Computational Statistics,
       32(1), 253-279.
    """

    grid = "sparse"

    def __init__(
        self,
        level: int,
        quadratic_base: bool = True,
        refine_to: int | None = None,
        **box_options,
    ) -> None:
        super().__init__(**box_options)
        self.level = int(level)
        self.quadratic_base = bool(quadratic_base)
        self.refine_to = refine_to
        self.interpolant = None

    def _interpolated_values(self, unit: np.ndarray) -> np.ndarray:
        """Exact ``U`` (minus the quadratic base) at unit-cube points of the box."""
        whitened = (2.0 * unit - 1.0) * self.box.half_width
        values = self._exact_values(whitened)
        if self.quadratic_base:
            values = values - 0.5 * np.sum(whitened**2, axis=1)
        return values

    def _fill_box(self) -> tuple[int, float]:
        dim = self.box.centre.size
        if self.refine_to is None:
            grid = SparseGrid(dim, self.level)
            self.interpolant = grid.fit(self._interpolated_values(grid.points))
        else:
            self.interpolant = adaptive_interpolant(dim, self._interpolated_values, self.refine_to)
            self.level = self.interpolant.grid.level
        grid = self.interpolant.grid
        self._kernel_arguments = (
            self.box.centre,
            self.box.inverse_factor,
            self.box.half_width,
            self.quadratic_base,
            (grid._active, grid._offsets, self.interpolant.surpluses, grid.level + 1),
            np.empty((3 * dim + 1, max(grid.level + 1, dim + 1))),
        )
        by_level = self.interpolant.surplus_by_level()
        return grid.n_points, float(by_level[-1])

    def gradient(self, position: np.ndarray) -> np.ndarray:
        """Approximate ``grad U`` at a point ``(d,)`` or rows ``(n, d)``; NaN outside the box."""
        position = np.asarray(position, dtype=float)
        if self._outside_quadratic and position.ndim == 2:
            return _extended_gradient_rows(position, *self._kernel_arguments[:-1])
        if position.ndim != 1 or self._outside_quadratic:
            return super().gradient(position)
        return _gradient_in_box(position, *self._kernel_arguments)

    def _evaluate(self, positions: np.ndarray, gradient: bool) -> np.ndarray:
        whitened = self.box.whiten(positions)
        radius = self.box.half_width
        scaled = (whitened + radius) / (2.0 * radius)
        unit = np.clip(scaled, 0.0, 1.0)
        outside = np.any(scaled != unit, axis=-1)
        if not self._outside_quadratic and np.all(outside):
            return np.full(whitened.shape if gradient else outside.shape, np.nan)
        if gradient:
            result = self.interpolant.gradient(unit) / (2.0 * radius)
            if self.quadratic_base:
                result = result + whitened
            result = result @ self.box.inverse_factor
            mask = np.expand_dims(outside, -1)
        elif self._outside_quadratic:
            # first-order extension of the interpolant beyond the box
            value, slope = self.interpolant.value_and_gradient(unit)
            result = value + np.sum(slope * (scaled - unit), axis=-1)
            mask = outside
        else:
            result = np.asarray(self.interpolant.value(unit))
            mask = outside
        if not gradient and self.quadratic_base:
            result = result + 0.5 * np.sum(whitened**2, axis=-1)
        if not self._outside_quadratic:
            result = np.where(mask, np.nan, result)
        return result
