"""A sparse-grid surrogate of the potential over a box around the posterior's bulk.

Sparse-grid HMC (Zhang, Shahbaba & Zhao, section 3.4): inside the domain of interest
(:mod:`~pymc_rnshmc.surrogates.domain`) the potential ``U`` is replaced by a Smolyak interpolant
precomputed on a sparse grid (:mod:`~pymc_rnshmc.surrogates.sparse_grid`); outside it the exact
potential is used (their eq. 3.11).

The interpolated function is the residual ``U(q) - |z|^2 / 2`` when ``quadratic_base`` is on: for
a Laplace box ``|z|^2 / 2`` is the Laplace approximation's own potential, so the piecewise-linear
basis only has to capture the departure from it, which is smaller and smoother than ``U``.
"""

from __future__ import annotations

import numpy as np

from pymc_rnshmc.surrogates.domain import BoxSurrogate
from pymc_rnshmc.surrogates.sparse_grid import SparseGrid, adaptive_interpolant

__all__ = ["SparseGridSurrogate"]


class SparseGridSurrogate(BoxSurrogate):
    """Sparse-grid interpolant of the potential over a box, NaN outside it.

    Parameters
    ----------
    level : int
        Smolyak level (``level >= 1``; ``2 d + 1`` points at level 1).
    mass, domain, exact_potential, exact_potential_and_gradient
        As for :class:`~pymc_rnshmc.surrogates.domain.BoxSurrogate`.
    quadratic_base : bool
        Interpolate ``U - |z|^2 / 2`` instead of ``U``.
    refine_to : int, optional
        Instead of the isotropic grid of ``level``, refine adaptively from level 1 where the
        hierarchical surpluses are largest, up to this many nodes
        (:func:`~pymc_rnshmc.surrogates.sparse_grid.adaptive_interpolant`).

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
        by_level = self.interpolant.surplus_by_level()
        return self.interpolant.grid.n_points, float(by_level[-1])

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
