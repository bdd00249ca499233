r"""Elliptic PDE inverse problem: Karhunen-Loeve field, Q1 finite elements, adjoint gradient.

The forward model of the RNS-HMC paper [1]_ (section 5.2) and the sparse-grid HMC paper [2]_
(section 4.4), after Dashti & Stuart [3]_: :math:`\nabla \cdot (c(x, \theta) \nabla u) = 0` on
:math:`[0, 1]^2` with :math:`u = x_1` on :math:`x_2 = 0`, :math:`u = 1 - x_1` on :math:`x_2 = 1`
and :math:`\partial u / \partial x_1 = 0` on :math:`x_1 = 0, 1`. The log-diffusivity
:math:`\log c(x, \theta) = \sum_{i=1}^d \theta_i \sqrt{\lambda_i} v_i(x)` is a truncated
Karhunen-Loeve expansion of a Gaussian process with covariance
:math:`\sigma^2 \exp(-|x - x'|^2 / (2 \ell^2))`, :math:`\sigma^2 = 1`, :math:`\ell = 0.2`. The
data are the solution at the 121 points of a uniform 11 x 11 grid on the closed square.

Discretization
--------------
* **Karhunen-Loeve.** The kernel is separable, :math:`\sigma^2 k_1(x_1, x_1') k_1(x_2, x_2')`,
  so the 1-D integral operator is discretized once (Nystrom method on Gauss-Legendre points)
  and the 2-D eigenpairs are products of 1-D ones, sorted by eigenvalue; of an exact tie
  ``(a, b)``/``(b, a)`` the mode varying less along :math:`x_1` comes first. Eigenfunctions are
  evaluated anywhere by Nystrom interpolation, so meshes of any size share one field.
* **Finite elements.** Continuous Galerkin, bilinear (Q1) basis functions on a uniform
  ``n x n`` square mesh; :math:`c` is evaluated at the 2 x 2 Gauss points of each element (not
  taken constant per element). Each Gauss point adds a fixed 4 x 4 template times :math:`c`, so
  the stiffness matrix is linear in the ``4 n^2`` Gauss-point values: precomputed sparse maps
  turn them into the band of the free-free block and into the right-hand side, and assembly
  for a new :math:`\theta` is two sparse products. Dirichlet rows (:math:`x_2 = 0, 1`) are
  eliminated by lifting; the Neumann sides are natural.
* **Solve and adjoint.** Numbered row by row, the free-free block :math:`K` is symmetric
  positive definite with half-bandwidth ``n + 2``. It is factorized once per :math:`\theta` by
  LAPACK's banded Cholesky (``scipy.linalg.cholesky_banded``: at 30 x 30 a fifth of the time
  of ``scipy.sparse.linalg.splu``) and the factor is cached. A vector-Jacobian product then
  costs one more solve with the same factor: :math:`w^T \partial y / \partial \theta_i =
  -\lambda^T (\partial K / \partial \theta_i) u` with :math:`K \lambda = O^T w`, summed element
  by element without forming :math:`\partial K / \partial \theta_i`.
* **Observations.** Bilinear interpolation of the nodal solution, a sparse matrix :math:`O`.

The discretization is small and regular, so it is written here on ``scipy.sparse`` and LAPACK
rather than taken from a finite-element library: none is a dependency of this package, and
none is needed for Q1 elements on a uniform square mesh. No PyMC or PyTensor import here.

References
----------
.. [1] Zhang, C., Shahbaba, B., & Zhao, H. (2017). Hamiltonian Monte Carlo acceleration using
   surrogate functions with random bases. Statistics and Computing, 27(6), 1473-1490.
.. [2] Zhang, C., Shahbaba, B., & Zhao, H. (2017). Precomputing strategy for Hamiltonian Monte
   Carlo method based on regularity in parameter space. Computational Statistics, 32(1).
.. [3] Dashti, M., & Stuart, A. M. (2011). Uncertainty quantification and weak approximation
   of an elliptic inverse problem. SIAM Journal on Numerical Analysis, 49(6), 2524-2542.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.sparse as sparse
from scipy.linalg import cho_solve_banded, cholesky_banded

__all__ = [
    "EllipticPDEForwardModel",
    "KarhunenLoeveExpansion",
    "SyntheticData",
    "observation_points",
    "synthetic_data",
]

GAUSS_OFFSETS = 0.5 + np.array([-0.5, 0.5]) / np.sqrt(3.0)
"""The 2-point Gauss-Legendre nodes on [0, 1] (weights 1/2 each)."""
LOCAL_CORNERS = np.array([[0, 0], [1, 0], [1, 1], [0, 1]])
"""Reference corners of the four local nodes, counter-clockwise from the origin."""


class KarhunenLoeveExpansion:
    """Leading Karhunen-Loeve modes of the squared-exponential kernel on the unit square.

    Parameters
    ----------
    n_modes : int
        Number of 2-D modes ``d`` kept.
    length_scale : float
        Length scale ``l`` of ``variance * exp(-|x - x'|^2 / (2 l^2))``.
    variance : float
        Marginal variance of the Gaussian process.
    n_quadrature : int
        Gauss-Legendre points of the 1-D Nystrom discretization.

    Attributes
    ----------
    eigenvalues : numpy.ndarray
        The ``n_modes`` eigenvalues, non-increasing.
    mode_indices : numpy.ndarray
        ``(n_modes, 2)`` indices of the 1-D modes along ``x1`` and ``x2`` of each 2-D mode.

    References
    ----------
    .. [1] Zhang, Shahbaba & Zhao (2017), Statistics and Computing 27(6), section 5.2.
    .. [2] Dashti & Stuart (2011), SIAM Journal on Numerical Analysis 49(6), 2524-2542.
    """

    def __init__(
        self,
        n_modes: int = 20,
        length_scale: float = 0.2,
        variance: float = 1.0,
        n_quadrature: int = 48,
    ) -> None:
        nodes, weights = np.polynomial.legendre.leggauss(n_quadrature)
        self.nodes, self.weights = (nodes + 1.0) / 2.0, weights / 2.0
        self.length_scale = float(length_scale)
        root = np.sqrt(self.weights)
        symmetric = root[:, None] * self._kernel_1d(self.nodes) * root[None, :]
        values, vectors = np.linalg.eigh(symmetric)
        order = np.argsort(values)[::-1]
        kept = order[values[order] > values[order[0]] * 1e-12]
        self.eigenvalues_1d = values[kept]
        self.nodal_values_1d = vectors[:, kept] / root[:, None]  # orthonormal under weights
        self.nodal_values_1d *= np.sign(self._interpolate_1d(np.zeros(1)))
        products = np.outer(self.eigenvalues_1d, self.eigenvalues_1d)
        first, second = np.meshgrid(np.arange(kept.size), np.arange(kept.size), indexing="ij")
        ranked = np.lexsort((second.ravel(), first.ravel(), -products.ravel()))[:n_modes]
        if ranked.size < n_modes:
            raise ValueError(f"only {ranked.size} numerically positive modes are available")
        self.mode_indices = np.column_stack([first.ravel()[ranked], second.ravel()[ranked]])
        self.eigenvalues = variance * products.ravel()[ranked]

    @property
    def n_modes(self) -> int:
        return int(self.eigenvalues.size)

    def _kernel_1d(self, points: np.ndarray) -> np.ndarray:
        distance = points[:, None] - self.nodes[None, :]
        return np.exp(-(distance**2) / (2.0 * self.length_scale**2))

    def _interpolate_1d(self, points: np.ndarray) -> np.ndarray:
        """Nystrom interpolation of the 1-D eigenfunctions at ``points``, ``(n, n_1d)``."""
        weighted = self._kernel_1d(points) * self.weights[None, :]
        return weighted @ self.nodal_values_1d / self.eigenvalues_1d[None, :]

    def eigenfunctions(self, points: np.ndarray) -> np.ndarray:
        """Values ``v_i(x)`` of the kept eigenfunctions at ``points`` (``(n, 2)``), ``(n, d)``."""
        points = np.asarray(points, dtype=float)
        along_first = self._interpolate_1d(points[:, 0])[:, self.mode_indices[:, 0]]
        along_second = self._interpolate_1d(points[:, 1])[:, self.mode_indices[:, 1]]
        return along_first * along_second

    def scaled_eigenfunctions(self, points: np.ndarray) -> np.ndarray:
        """``sqrt(lambda_i) v_i(x)`` at ``points``: ``log c = scaled_eigenfunctions @ theta``."""
        return self.eigenfunctions(points) * np.sqrt(self.eigenvalues)[None, :]


def observation_points(per_side: int = 11) -> np.ndarray:
    """The ``per_side**2`` points of a uniform grid on the closed unit square, ``x1`` fastest."""
    grid = np.linspace(0.0, 1.0, per_side)
    second, first = np.meshgrid(grid, grid, indexing="ij")
    return np.column_stack([first.ravel(), second.ravel()])


def _reference_gradients(offset: np.ndarray) -> np.ndarray:
    """Gradients of the four bilinear shape functions at reference point ``offset``, ``(4, 2)``."""
    signs = 2 * LOCAL_CORNERS - 1  # d/dxi of xi is +1, of (1 - xi) is -1
    factors = np.where(LOCAL_CORNERS == 1, offset[None, :], 1.0 - offset[None, :])
    return np.column_stack([signs[:, 0] * factors[:, 1], signs[:, 1] * factors[:, 0]])


class EllipticPDEForwardModel:
    """Maps KL weights ``theta`` to the PDE solution at the observation points.

    Parameters
    ----------
    n_cells : int
        Cells per side of the uniform square mesh (``(n_cells + 1)**2`` nodes).
    n_modes : int
        Karhunen-Loeve modes ``d`` (ignored when ``expansion`` is given).
    length_scale, variance : float
        Covariance of the log-diffusivity (ignored when ``expansion`` is given).
    observations_per_side : int
        The observations are on a uniform ``observations_per_side**2`` grid.
    expansion : KarhunenLoeveExpansion, optional
        A precomputed expansion, to share one field between meshes.

    Notes
    -----
    The Cholesky factor of the last ``theta`` solved is kept, so a vector-Jacobian product at
    the same ``theta`` (as a gradient-based sampler asks for right after the value) costs one
    solve with it and no assembly. The cache is dropped on pickling. Where the diffusivity
    overflows or the factorization fails, the solution and the gradient are NaN.

    References
    ----------
    .. [1] Zhang, Shahbaba & Zhao (2017), Statistics and Computing 27(6), section 5.2.
    .. [2] Zhang, Shahbaba & Zhao (2017), Computational Statistics 32(1), section 4.4.
    .. [3] Dashti & Stuart (2011), SIAM Journal on Numerical Analysis 49(6), 2524-2542.
    """

    def __init__(
        self,
        n_cells: int = 30,
        n_modes: int = 20,
        length_scale: float = 0.2,
        variance: float = 1.0,
        observations_per_side: int = 11,
        expansion: KarhunenLoeveExpansion | None = None,
    ) -> None:
        if expansion is None:
            expansion = KarhunenLoeveExpansion(n_modes, length_scale, variance)
        self.expansion = expansion
        self.n_cells = int(n_cells)
        side = self.n_cells + 1
        spacing = 1.0 / self.n_cells
        grid = np.linspace(0.0, 1.0, side)
        second, first = np.meshgrid(grid, grid, indexing="ij")
        self.node_coordinates = np.column_stack([first.ravel(), second.ravel()])
        cell_first, cell_second = np.meshgrid(np.arange(self.n_cells), np.arange(self.n_cells))
        corner = (cell_second * side + cell_first).ravel()  # node at the cell's lower left
        self.element_nodes = corner[:, None] + LOCAL_CORNERS[:, 0] + LOCAL_CORNERS[:, 1] * side
        gauss = np.array([[a, b] for b in GAUSS_OFFSETS for a in GAUSS_OFFSETS])
        lower_left = self.node_coordinates[corner]
        self.quadrature_points = (lower_left[:, None, :] + spacing * gauss[None]).reshape(-1, 2)
        self.log_diffusivity_basis = self.expansion.scaled_eigenfunctions(self.quadrature_points)
        # In 2-D the element stiffness does not depend on the cell size: 1/h^2 * h^2.
        gradients = np.stack([_reference_gradients(point) for point in gauss])
        self.templates = 0.25 * np.einsum("qad,qbd->qab", gradients, gradients)
        self._templates_by_row = self.templates.transpose(1, 0, 2).reshape(4, 16)  # a, (q, b)

        first, second = self.node_coordinates.T
        bottom, top = second == 0.0, second == 1.0
        on_dirichlet = bottom | top
        self.free_nodes = np.flatnonzero(~on_dirichlet)
        self.boundary_values = np.zeros(side * side)  # u = x1 at the bottom, 1 - x1 at the top
        self.boundary_values[bottom] = first[bottom]
        self.boundary_values[top] = 1.0 - first[top]
        self._build_assembly_maps(on_dirichlet)
        self.observation_matrix = self._interpolation_matrix(
            observation_points(observations_per_side)
        )
        self._cache: tuple | None = None

    @property
    def n_modes(self) -> int:
        return self.expansion.n_modes

    @property
    def n_observations(self) -> int:
        return self.observation_matrix.shape[0]

    def _build_assembly_maps(self, on_dirichlet: np.ndarray) -> None:
        """Sparse maps from Gauss-point diffusivities to the band of K_ff and to the load."""
        n_elements = self.element_nodes.shape[0]
        free_index = np.full(on_dirichlet.size, -1)
        free_index[self.free_nodes] = np.arange(self.free_nodes.size)
        # One entry per (element, row node a, column node b, Gauss point q).
        rows = np.broadcast_to(self.element_nodes[:, :, None, None], (n_elements, 4, 4, 4))
        columns = np.broadcast_to(self.element_nodes[:, None, :, None], rows.shape)
        points = np.arange(n_elements)[:, None, None, None] * 4 + np.arange(4)
        points = np.broadcast_to(points, rows.shape)
        values = np.broadcast_to(np.moveaxis(self.templates, 0, -1)[None], rows.shape)
        rows, columns, points, values = (a.ravel() for a in (rows, columns, points, values))
        free_row, free_column = free_index[rows], free_index[columns]
        n_free, n_points = self.free_nodes.size, n_elements * 4

        # Upper band storage as LAPACK wants it: band[bandwidth + i - j, j] = K[i, j], i <= j.
        upper = (free_row >= 0) & (free_column >= free_row)
        self._bandwidth = int(np.max(free_column[upper] - free_row[upper]))
        band_row = self._bandwidth + free_row[upper] - free_column[upper]
        self._stiffness_map = sparse.csr_matrix(
            (values[upper], (band_row * n_free + free_column[upper], points[upper])),
            shape=((self._bandwidth + 1) * n_free, n_points),
        )
        lifted = (free_row >= 0) & (free_column < 0)
        self._load_map = sparse.csr_matrix(
            (
                -values[lifted] * self.boundary_values[columns[lifted]],
                (free_row[lifted], points[lifted]),
            ),
            shape=(n_free, n_points),
        )

    def _interpolation_matrix(self, points: np.ndarray) -> sparse.csr_matrix:
        """Bilinear interpolation of nodal values at ``points`` as a sparse matrix."""
        scaled = np.asarray(points, dtype=float) * self.n_cells
        cell = np.clip(np.floor(scaled).astype(int), 0, self.n_cells - 1)
        offset = scaled - cell
        weights = np.prod(
            np.where(LOCAL_CORNERS[None] == 1, offset[:, None, :], 1.0 - offset[:, None, :]), -1
        )
        corner = cell[:, 1] * (self.n_cells + 1) + cell[:, 0]
        columns = corner[:, None] + LOCAL_CORNERS[:, 0] + LOCAL_CORNERS[:, 1] * (self.n_cells + 1)
        rows = np.repeat(np.arange(len(points)), 4)
        shape = (len(points), self.node_coordinates.shape[0])
        return sparse.csr_matrix((weights.ravel(), (rows, columns.ravel())), shape=shape)

    def diffusivity(self, theta: np.ndarray) -> np.ndarray:
        """``c`` at the Gauss points, ``(n_elements, 4)``."""
        log_c = self.log_diffusivity_basis @ np.asarray(theta, dtype=float)
        return np.exp(log_c).reshape(-1, 4)

    def _factorize(self, theta: np.ndarray) -> tuple:
        """``(theta, diffusivity, Cholesky band, nodal solution)``, cached for the last theta."""
        theta = np.array(theta, dtype=float).reshape(self.n_modes)
        if self._cache is not None and np.array_equal(self._cache[0], theta):
            return self._cache
        with np.errstate(over="ignore"):
            diffusivity = self.diffusivity(theta).ravel()
        solution = self.boundary_values.copy()
        factor = None
        if np.all(np.isfinite(diffusivity)):
            band = (self._stiffness_map @ diffusivity).reshape(self._bandwidth + 1, -1)
            try:
                factor = cholesky_banded(band, check_finite=False)
            except np.linalg.LinAlgError:
                factor = None
        if factor is None:
            solution[self.free_nodes] = np.nan
        else:
            load = self._load_map @ diffusivity
            solution[self.free_nodes] = cho_solve_banded((factor, False), load, check_finite=False)
        self._cache = (theta, diffusivity, factor, solution)
        return self._cache

    def solve(self, theta: np.ndarray) -> np.ndarray:
        """Nodal solution ``u`` (``(n_cells + 1)**2`` values, ``x1`` fastest) for ``theta``."""
        return self._factorize(theta)[3].copy()

    def observe(self, theta: np.ndarray) -> np.ndarray:
        """The solution at the observation points for ``theta``."""
        return self.observation_matrix @ self._factorize(theta)[3]

    def vector_jacobian_product(self, theta: np.ndarray, cotangent: np.ndarray) -> np.ndarray:
        """``J^T cotangent``, ``J`` the Jacobian of :meth:`observe`, by one adjoint solve."""
        _, diffusivity, factor, solution = self._factorize(theta)
        if factor is None:
            return np.full(self.n_modes, np.nan)
        load = self.observation_matrix.T @ np.asarray(cotangent, dtype=float)
        adjoint = np.zeros_like(solution)
        adjoint[self.free_nodes] = cho_solve_banded(
            (factor, False), load[self.free_nodes], check_finite=False
        )
        # per_point[e, q] = adjoint_e^T templates[q] solution_e
        left = (adjoint[self.element_nodes] @ self._templates_by_row).reshape(-1, 4, 4)
        per_point = np.einsum("eqb,eb->eq", left, solution[self.element_nodes]).ravel()
        return -(self.log_diffusivity_basis.T @ (diffusivity * per_point))

    def observe_and_vjp(
        self, theta: np.ndarray, cotangent: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`observe` and :meth:`vector_jacobian_product` with one factorization."""
        return self.observe(theta), self.vector_jacobian_product(theta, cotangent)

    def gaussian_log_likelihood(
        self, theta: np.ndarray, observations: np.ndarray, noise_sd: float
    ) -> tuple[float, np.ndarray]:
        """Log-density of ``observations ~ N(observe(theta), noise_sd^2 I)`` and its gradient."""
        residual = np.asarray(observations, dtype=float) - self.observe(theta)
        value = -0.5 * np.sum((residual / noise_sd) ** 2) - residual.size * np.log(
            noise_sd * np.sqrt(2.0 * np.pi)
        )
        return float(value), self.vector_jacobian_product(theta, residual / noise_sd**2)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(n_cells={self.n_cells}, n_modes={self.n_modes})"

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_cache"] = None  # a worker process starts without a factorization
        return state


class SyntheticData(NamedTuple):
    """A synthetic data set of the elliptic inverse problem."""

    observations: np.ndarray
    true_theta: np.ndarray
    noiseless: np.ndarray


def synthetic_data(
    n_modes: int = 20,
    prior_sd: float = 0.5,
    data_cells: int = 50,
    noise_sd: float = 0.1,
    seed: int = 2017,
    expansion: KarhunenLoeveExpansion | None = None,
) -> SyntheticData:
    """Draw ``theta`` from the prior, solve on a finer mesh and observe with Gaussian noise.

    Parameters
    ----------
    n_modes : int
        Number of KL weights ``d``.
    prior_sd : float
        Prior standard deviation of each weight (0.5 in [1]_, 1 in [2]_).
    data_cells : int
        Cells per side of the data mesh (50, i.e. 51 x 51 nodes, as in [2]_).
    noise_sd : float
        Standard deviation of the observation noise.
    seed : int
        Seed of the true weights and the noise.
    expansion : KarhunenLoeveExpansion, optional
        The field's expansion; default the squared-exponential one with ``n_modes`` modes.

    Returns
    -------
    SyntheticData
        Noisy observations at the 11 x 11 points, the true weights and noiseless observations.

    References
    ----------
    .. [1] Zhang, Shahbaba & Zhao (2017), Statistics and Computing 27(6), section 5.2.
    .. [2] Zhang, Shahbaba & Zhao (2017), Computational Statistics 32(1), section 4.4.
    """
    rng = np.random.default_rng(seed)
    true_theta = prior_sd * rng.standard_normal(n_modes)
    model = EllipticPDEForwardModel(data_cells, n_modes, expansion=expansion)
    noiseless = model.observe(true_theta)
    observations = noiseless + noise_sd * rng.standard_normal(noiseless.size)
    return SyntheticData(observations, true_theta, noiseless)
