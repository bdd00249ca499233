"""SparseGridHMC: HMC whose trajectories follow a precomputed grid potential in a box."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from pymc_rnshmc._checks import check_positive_integer, check_probability
from pymc_rnshmc.exceptions import SurrogateWarning
from pymc_rnshmc.hmc.metrics import DenseMetric
from pymc_rnshmc.step_methods.reporting import SURROGATE_HMC_STATS
from pymc_rnshmc.step_methods.rnshmc import RNSHMC, SURROGATE, RNSHMCState
from pymc_rnshmc.surrogates.grid.domain import DOMAINS, BoxSurrogate
from pymc_rnshmc.surrogates.grid.force_map import ForceMapSurrogate
from pymc_rnshmc.surrogates.grid.sizing import DEFAULT_MAX_POINTS, choose_cells, choose_level
from pymc_rnshmc.surrogates.grid.sparse_grid_surrogate import SparseGridSurrogate

__all__ = ["SparseGridHMC"]

SPARSE_GRID_HMC_STATS: dict[str, tuple[Any, list | None]] = {
    **SURROGATE_HMC_STATS,
    "steps_outside_domain": (np.int64, []),
    "approximate_test": (bool, []),
}


class SparseGridHMC(RNSHMC):
    r"""Grid-based Hamiltonian Monte Carlo with a precomputed surrogate over a domain of interest.

    For models with a few parameters (about 2 to 10) and an expensive likelihood. Tuning starts
    with PyMC's exact NUTS (20 % of ``tune``, at least 50 draws; 200 on PyMC 5). Then the
    domain of interest is placed: a box around the posterior mode in the coordinates of the
    Laplace approximation (scipy's L-BFGS-B from the best exploration draw, Hessian by central
    differences of the exact gradient), holding probability ``mass`` of it, or a box around the
    exploration draws (by default when the Laplace box misses more than 10 % of them, as on a
    curved posterior). The exact model is evaluated on a grid in the box (the precomputation):
    a Smolyak sparse grid interpolated with the hierarchical piecewise-linear basis (sparse-grid
    HMC), or, with ``grid="full"``, the exact force at the centres of ``n^d`` cells used as a
    piecewise-constant force map (the paper's naive grid HMC, for ``d <= 3``). Trajectories
    follow the grid's force inside the box and the exact gradient outside it (eq. 3.11 of the
    paper: the force is a fixed function of the position, so the leapfrog stays reversible and
    volume preserving across the boundary); the Metropolis test uses the exact Hamiltonian, so
    the chain targets the exact posterior. After tuning a draw costs one exact logp plus one
    exact gradient per leapfrog step taken outside the box.

    Parameters
    ----------
    vars : list, optional
        Continuous variables to sample; default all continuous variables of the model.
    grid : {"sparse", "full"}
        Smolyak sparse grid, or a full grid of cells with a piecewise-constant force
        (``d <= 3``).
    level : int, optional
        Smolyak level of a sparse grid (at least 1). Default: the highest level whose grid has
        at most ``max_points`` nodes.
    cells_per_dimension : int, optional
        Cells along each axis of a full grid. Default: the most within ``max_points``.
    max_points : int
        Largest grid allowed (each node is one exact logp evaluation, each cell one exact logp
        and gradient).
    mass : float
        Probability of the box under the Gaussian approximation, in (0, 1).
    domain : {"auto", "laplace", "exploration"}
        How the box is placed: Laplace, around the exploration draws, or Laplace unless it
        holds less than 90 % of the exploration draws.
    quadratic_base : bool
        Sparse grid only: interpolate the departure of the potential from the Gaussian
        approximation's quadratic.
    refine : bool
        Sparse grid only: instead of an isotropic grid, start from level 1 and refine where the
        hierarchical surpluses are largest (dimension-adaptive), up to ``max_points`` nodes. Pays
        off when some directions of the posterior are much less Gaussian than others.
    exact_acceptance : bool
        ``False`` gives the paper's approximate "complete" variant (section 5): the Metropolis
        test uses the grid's potential inside the box, so a draw whose trajectory stays inside
        costs no exact evaluation at all, but the chain targets ``exp(-U~)`` instead of the
        posterior. It warns, and ``step.surrogate.report.kl_bound`` gives Theorem 5.1's bound
        ``2 max |U - U~|`` on the Kullback-Leibler divergence, estimated on the grid.
    **kwargs
        As for :class:`RNSHMC` (``exploration_steps``, ``path_length``, ``target_accept``,
        ``surrogate_target_accept``, NUTS options); ``surrogate_target_accept`` defaults to 0.9.
        With ``grid="full"`` the step size is adapted on the exact acceptance, towards
        ``surrogate_target_accept`` (0.8 by default there).

    Notes
    -----
    Sampler statistics: those of :class:`RNSHMC` plus ``steps_outside_domain``, the leapfrog
    steps of the draw that used the exact gradient because they were outside the box (also
    counted in ``n_gradient_evals``), and ``approximate_test``, whether the draw's Metropolis
    test used the grid's potential (only with ``exact_acceptance=False``). The precomputation
    is reported in ``step.surrogate.report`` and counts in the wall time of ``pm.sample``.

    References
    ----------
    .. [1] Zhang, C., Shahbaba, B., & Zhao, H. (2017). Precomputing strategy for Hamiltonian
       Monte Carlo method based on regularity in parameter space. Computational Statistics,
       32(1), 253-279.
    .. [2] Bungartz, H.-J., & Griebel, M. (2004). Sparse grids. Acta Numerica, 13, 147-269.
    """

    name = "sparse_grid_hmc"
    stats_dtypes_shapes = SPARSE_GRID_HMC_STATS
    _state_class = RNSHMCState
    # The trajectory simulations call the grid's gradient hundreds of thousands of times:
    # shorter simulated chains keep the setup short.
    _simulated_draws = 100
    # The short exploration's integration times refer to a barely adapted mass matrix (as in
    # ARNSHMC): let the candidates reach a quarter oscillation in a whitening metric.
    _shortest_jump = 0.25

    def __init__(
        self,
        vars=None,
        *,
        grid: str = "sparse",
        level: int | None = None,
        cells_per_dimension: int | None = None,
        max_points: int = DEFAULT_MAX_POINTS,
        mass: float = 0.999,
        domain: str = "auto",
        quadratic_base: bool = True,
        refine: bool = False,
        exact_acceptance: bool = True,
        **kwargs,
    ) -> None:
        max_points = check_positive_integer("max_points", max_points)
        self.mass = check_probability("mass", mass)
        if domain not in DOMAINS:
            raise ValueError(f"domain must be one of {DOMAINS}, got {domain!r}.")
        if grid not in ("sparse", "full"):
            raise ValueError(f"grid must be 'sparse' or 'full', got {grid!r}.")
        for option in ("surrogate", "n_hidden", "hidden_units", "activation", "quadratic"):
            if option in kwargs:
                raise TypeError(f"SparseGridHMC does not take `{option}` (a RNSHMC option).")
        self.grid = grid
        self.domain = domain
        self.quadratic_base = bool(quadratic_base)
        self.refine = bool(refine)
        self.max_points = max_points
        self.exact_acceptance = bool(exact_acceptance)
        kwargs.setdefault("surrogate_target_accept", 0.8 if grid == "full" else 0.9)
        super().__init__(vars, **kwargs)
        dim = self._exact_logp.size
        if grid == "sparse":
            if cells_per_dimension is not None:
                raise ValueError("cells_per_dimension is for grid='full'; use `level`.")
            if refine and level is not None:
                raise ValueError("refine=True chooses the grid adaptively; do not pass `level`.")
            self.level = choose_level(dim, 1 if refine else level, max_points)
            self.cells_per_dimension = None
        else:
            if level is not None or refine:
                raise ValueError(
                    "level and refine are for grid='sparse'; use `cells_per_dimension`."
                )
            self.level = None
            self.cells_per_dimension = choose_cells(dim, cells_per_dimension, max_points)

    def _start_chain(self) -> None:
        super()._start_chain()
        self._approximate_tests = 0
        # Leaving the box is how the method works, not a surrogate failure to warn about.
        self._warned_exact_forces = True

    def _exploration_length(self) -> int:
        if self.exploration_steps is not None:
            return self.exploration_steps
        if self._tune_steps is not None:
            return max(min(50, self._tune_steps), round(0.2 * self._tune_steps))
        return 200

    @staticmethod
    def _minimum_training_points(dim: int) -> int:
        return dim + 2

    def _new_surrogate(self) -> BoxSurrogate:
        options = {
            "mass": self.mass,
            "domain": self.domain,
            "exact_potential": self._exact_potential_rows,
            "exact_potential_and_gradient": self._exact_potential_and_gradient,
        }
        if self.grid == "full":
            return ForceMapSurrogate(self.cells_per_dimension, **options)
        return SparseGridSurrogate(
            self.level,
            quadratic_base=self.quadratic_base,
            refine_to=self.max_points if self.refine else None,
            **options,
        )

    @staticmethod
    def _describe_fit(report) -> str:
        size = (
            f"a level-{report.level} sparse grid of {report.n_points} points"
            if report.grid == "sparse"
            else f"a force map of {report.n_points} cells"
        )
        return (
            f": {size} in a {report.domain} box (half-width {report.half_width:.2f}), "
            f"{report.n_points} + {report.n_laplace_evaluations} exact evaluations in "
            f"{report.seconds:.2g} s, estimated largest error of the potential "
            f"{report.max_potential_error:.2g}"
        )

    @staticmethod
    def _extra_metrics(surrogate: BoxSurrogate) -> tuple:
        # The box's Gaussian approximation (Laplace or exploration) is a dense metric candidate.
        factor = surrogate.box.factor
        try:
            return (DenseMetric(factor @ factor.T),)
        except np.linalg.LinAlgError:
            return ()

    @staticmethod
    def _simulation_surrogate(surrogate: BoxSurrogate) -> BoxSurrogate:
        # Outside the box the sampler uses exact evaluations; simulations use the quadratic
        # of the box's Gaussian approximation there instead, at no cost.
        return surrogate.extended_by_quadratic()

    def _fit_surrogate(self, end_of_tuning: bool) -> None:
        super()._fit_surrogate(end_of_tuning)
        if self.phase == SURROGATE and not self.exact_acceptance:
            self._cache = None  # the cached exact logp is not the approximate target's
            warnings.warn(
                "SparseGridHMC(exact_acceptance=False) uses the grid's potential in the "
                "Metropolis test inside the box, so the draws come from an approximation of the "
                "posterior, not the posterior itself. Kullback-Leibler divergence bound "
                f"2 max|U - U~| = {self.surrogate.report.kl_bound:.3g} (estimated on the grid "
                "and the exploration draws). Use exact_acceptance=True for exact draws.",
                SurrogateWarning,
                stacklevel=2,
            )

    def _exact_potential_rows(self, positions: np.ndarray) -> np.ndarray:
        # A loop: vectorizing the model's logp graph over rows (pytensor's vectorize_graph)
        # took 9-34 s to compile and was no faster per row on the benchmark workloads.
        return -np.array([self._exact_logp(position) for position in np.atleast_2d(positions)])

    def _target_logp(self, position: np.ndarray) -> tuple[float, int]:
        if not self.exact_acceptance and self.phase == SURROGATE:
            value = float(self.surrogate.potential(position))
            if np.isfinite(value):
                self._approximate_tests += 1
                return -value, 0
        return super()._target_logp(position)

    def _adaptation_accept(self, accept: float, integrator_accept: float) -> float:
        # A piecewise-constant force is the gradient of no potential: measured against any
        # continuous one, its dynamics lose energy that no step size can save, and adapting on
        # that shrank the step tenfold. The exact acceptance is the honest signal here.
        return accept if self.grid == "full" else integrator_accept

    def _surrogate_potential(self, position: np.ndarray, exact_logp: float) -> float:
        # eq. 3.11: the grid inside the box (NaN outside), the exact potential outside
        value = float(self.surrogate.potential(position))
        return value if np.isfinite(value) else -float(exact_logp)

    def astep(self, q0):
        self._approximate_tests = 0
        q_new, (stats,) = super().astep(q0)
        used = stats["used_surrogate"]
        stats["steps_outside_domain"] = self._exact_forces if used else 0
        stats["approximate_test"] = bool(used and self._approximate_tests > 0)
        return q_new, [stats]
