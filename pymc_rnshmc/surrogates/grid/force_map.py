"""Naive grid HMC's surrogate: a piecewise-constant force map on a full grid over a box.

The sparse-grid HMC paper's Algorithm 2 (section 3.3): the domain of interest
(:mod:`~pymc_rnshmc.surrogates.grid.domain`) is cut into ``n^d`` equal cells (in the box's whitened
coordinates) and the force in a cell is the exact one at the cell's centre. A piecewise-constant
force is the gradient of no continuous potential; the potential this surrogate reports (for the
sampler's diagnostics, its step-size adaptation, the trajectory simulations, and the Metropolis
test of the approximate variant) is the multilinear interpolant of the exact values at the cell
centres, continuous and second-order accurate. The first-order Taylor expansions at the centres
would match the force but jump across cell boundaries by about the curvature times the cell
width squared, which step-size adaptation would mistake for integration error.

Each of the ``n^d`` cells costs one exact ``(U, grad U)`` evaluation, so this is for ``d <= 3``;
a force lookup is a whitening, a floor and a table read, a few microseconds. Leapfrog with any
force that is a fixed function of the position is reversible and volume preserving, so with the
exact Metropolis test the chain stays exact however coarse the cells.
"""

from __future__ import annotations

import itertools

import numba
import numpy as np

from pymc_rnshmc.exceptions import SurrogateFitError
from pymc_rnshmc.surrogates.grid.domain import BoxSurrogate

__all__ = ["ForceMapSurrogate"]


@numba.njit(cache=True, nogil=True)
def _cell_force(position, centre, inverse_factor, radius, width, cells, strides, forces):
    """The force table's row for one point (a copy); NaN outside the box.

    One compiled call per leapfrog step: the same lookup in numpy calls cost several times
    more than the table read.
    """
    whitened = inverse_factor @ (position - centre)
    flat = 0
    for k in range(whitened.shape[0]):
        if not (-radius <= whitened[k] <= radius):
            return np.full(whitened.shape[0], np.nan)
        flat += min(int((whitened[k] + radius) // width), cells - 1) * strides[k]
    return forces[flat].copy()


class ForceMapSurrogate(BoxSurrogate):
    """Piecewise-constant force on ``cells_per_dimension^d`` cells of a box, NaN outside it.

    ``gradient`` is the exact force at the centre of the point's cell; ``potential`` is the
    multilinear interpolant of the exact potential at the cell centres.

    Parameters
    ----------
    cells_per_dimension : int
        Cells along each axis of the box (at least 3, for the error estimate).
    mass, domain, exact_potential, exact_potential_and_gradient
        As for :class:`~pymc_rnshmc.surrogates.grid.domain.BoxSurrogate`.

    References
    ----------
    .. [1] Zhang, C., Shahbaba, B., & Zhao, H. (2017). Precomputing strategy for Hamiltonian
       Monte Carlo method based on regularity in parameter space. Computational Statistics,
       32(1), 253-279.
    """

    grid = "full"
    # A piecewise-constant force is the gradient of no potential: measured against any
    # continuous one, its dynamics lose energy that no step size can save.
    is_gradient_field = False

    def __init__(self, cells_per_dimension: int, **box_options) -> None:
        super().__init__(**box_options)
        self.cells_per_dimension = int(cells_per_dimension)

    def _fill_box(self) -> tuple[int, float]:
        dim, cells = self.box.centre.size, self.cells_per_dimension
        width = 2.0 * self.box.half_width / cells
        axis = -self.box.half_width + (np.arange(cells) + 0.5) * width
        centres = np.stack(np.meshgrid(*([axis] * dim), indexing="ij"), axis=-1).reshape(-1, dim)
        values = np.empty(len(centres))
        gradients = np.empty_like(centres)
        for row, centre in enumerate(self.box.position(centres)):
            values[row], gradients[row] = self.exact_potential_and_gradient(centre)
        if not (np.all(np.isfinite(values)) and np.all(np.isfinite(gradients))):
            failing = int(np.sum(~np.isfinite(values) | ~np.all(np.isfinite(gradients), axis=1)))
            raise SurrogateFitError(
                f"the exact potential or its gradient is not finite at {failing} of "
                f"{len(values)} cell centres; lower `mass` to shrink the box"
            )
        self._cell_width = width
        self._centres = centres
        self._values = values
        self._gradients = gradients  # in the sampler's coordinates: what a leapfrog step reads
        self._strides = cells ** np.arange(dim - 1, -1, -1)
        self._corners = np.array(list(itertools.product((0, 1), repeat=dim)))
        return len(values), self._interpolation_error()

    def _interpolation_error(self) -> float:
        """Three eighths of the largest second difference of the centre values.

        ``|U(c + s) - 2 U(c) + U(c - s)|`` along the axes and diagonals ``s``. For a quadratic
        ``U`` an eighth of it bounds the interpolant's error between centres, and three eighths
        its error in the half cells beyond the outer centres, where it extrapolates.
        """
        cells, dim = self.cells_per_dimension, self.box.centre.size
        index = np.stack(np.unravel_index(np.arange(len(self._values)), (cells,) * dim), axis=1)
        largest = 0.0
        for offset in itertools.product((-1, 0, 1), repeat=dim):
            offset = np.array(offset)
            if not offset.any():
                continue
            reach = np.abs(offset)
            valid = np.all((index >= reach) & (index < cells - reach), axis=1)
            forward = self._values[(index[valid] + offset) @ self._strides]
            backward = self._values[(index[valid] - offset) @ self._strides]
            if forward.size:
                second = forward - 2.0 * self._values[valid] + backward
                largest = max(largest, float(np.max(np.abs(second))))
        return 3.0 * largest / 8.0

    def _interpolate(self, whitened: np.ndarray) -> np.ndarray:
        """Multilinear interpolant of the centre values, linear beyond the outer centres."""
        cells = self.cells_per_dimension
        fraction = (whitened + self.box.half_width) / self._cell_width - 0.5
        lower = np.clip(np.floor(fraction), 0, cells - 2)
        weight = fraction - lower
        lower = lower.astype(np.intp)
        value = 0.0
        for corner in self._corners:
            factors = np.where(corner == 1, weight, 1.0 - weight)
            value = (
                value + np.prod(factors, axis=-1) * self._values[(lower + corner) @ self._strides]
            )
        return value

    def gradient(self, position: np.ndarray) -> np.ndarray:
        """The exact force at the centre of the point's cell (or rows); NaN outside the box."""
        if np.ndim(position) != 1 or self._outside_quadratic:
            return super().gradient(position)
        box = self.box
        return _cell_force(
            np.asarray(position, dtype=float),
            box.centre,
            box.inverse_factor,
            box.half_width,
            self._cell_width,
            self.cells_per_dimension,
            self._strides,
            self._gradients,
        )

    def _evaluate(self, positions: np.ndarray, gradient: bool) -> np.ndarray:
        # Rows (the trajectory simulations), potentials and the extension: plain ufuncs and
        # methods, no numpy wrapper functions, keep the call overhead low.
        box = self.box
        whitened = (positions - box.centre) @ box.inverse_factor.T
        radius = box.half_width
        clipped = np.minimum(np.maximum(whitened, -radius), radius)
        outside = (clipped != whitened).any(axis=-1)
        if gradient:
            index = np.minimum((clipped + radius) // self._cell_width, self.cells_per_dimension - 1)
            result = self._gradients[index.astype(np.intp) @ self._strides]
            if self._outside_quadratic:
                return result + (whitened - clipped) @ box.inverse_factor
            mask = outside[..., None]
        else:
            result = self._interpolate(whitened if self._outside_quadratic else clipped)
            if self._outside_quadratic:
                return result + 0.5 * (whitened**2 - clipped**2).sum(axis=-1)
            mask = outside
        return np.where(mask, np.nan, result)
