"""SparseGridHMC: HMC whose trajectories follow a precomputed sparse-grid potential in a box."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from pymc_rnshmc.metrics import DenseMetric
from pymc_rnshmc.step_methods.reporting import SURROGATE_HMC_STATS
from pymc_rnshmc.step_methods.rnshmc import RNSHMC, RNSHMCState
from pymc_rnshmc.surrogates.sparse_grid import SparseGrid
from pymc_rnshmc.surrogates.sparse_grid_surrogate import SparseGridSurrogate
from pymc_rnshmc.validation import check_positive_integer, check_probability

__all__ = ["SparseGridHMC"]

DEFAULT_MAX_POINTS = 2000
SPARSE_GRID_HMC_STATS: dict[str, tuple[Any, list | None]] = {
    **SURROGATE_HMC_STATS,
    "steps_outside_domain": (np.int64, []),
}


def choose_level(dim: int, level: int | None, max_points: int) -> int:
    """The requested level, or the highest whose grid has at most ``max_points`` nodes.

    Raises
    ------
    ValueError
        The grid would need more than ``max_points`` exact evaluations.
    """
    if level is not None:
        if isinstance(level, bool) or not isinstance(level, numbers.Integral) or level < 1:
            raise ValueError(f"level must be an integer >= 1, got {level!r}.")
        needed = SparseGrid.count_points(dim, int(level))
        if needed > max_points:
            raise ValueError(
                f"A level-{level} sparse grid in {dim} dimensions has {needed} points, each an "
                f"exact logp evaluation, more than max_points={max_points}. Lower `level`, raise "
                "`max_points`, or use RNSHMC or ARNSHMC, whose cost does not grow like this with "
                "the dimension."
            )
        return int(level)
    if SparseGrid.count_points(dim, 1) > max_points:
        raise ValueError(
            f"Even a level-1 sparse grid in {dim} dimensions has "
            f"{SparseGrid.count_points(dim, 1)} points, more than max_points={max_points}. Use "
            "RNSHMC or ARNSHMC."
        )
    chosen = 1
    while SparseGrid.count_points(dim, chosen + 1) <= max_points:
        chosen += 1
    return chosen


class SparseGridHMC(RNSHMC):
    r"""Sparse-grid Hamiltonian Monte Carlo with a precomputed surrogate over a domain of interest.

    For models with a few parameters (about 2 to 10) and an expensive likelihood. Tuning starts
    with PyMC's exact NUTS (20 % of ``tune``, at least 50 draws; 200 on PyMC 5). Then the
    domain of interest is placed: a box around the posterior mode in the coordinates of the
    Laplace approximation (scipy's L-BFGS-B from the best exploration draw, Hessian by central
    differences of the exact gradient), holding probability ``mass`` of it; or, with
    ``domain="exploration"``, around the exploration draws. The exact potential is evaluated on
    a Smolyak sparse grid in the box (the precomputation) and interpolated with the hierarchical
    piecewise-linear basis. Trajectories follow the interpolant's gradient inside the box and
    the exact gradient outside it (eq. 3.11 of the paper: the force is a fixed function of the
    position, so the leapfrog stays reversible and volume preserving across the boundary); the
    Metropolis test uses the exact Hamiltonian, so the chain targets the exact posterior.
    After tuning a draw costs one exact logp plus one exact gradient per leapfrog step taken
    outside the box.

    Parameters
    ----------
    vars : list, optional
        Continuous variables to sample; default all continuous variables of the model.
    level : int, optional
        Smolyak level of the grid (at least 1). Default: the highest level whose grid has at
        most ``max_points`` nodes.
    max_points : int
        Largest grid allowed (each node is one exact logp evaluation).
    mass : float
        Probability of the box under the Gaussian approximation, in (0, 1).
    domain : {"laplace", "exploration"}
        How the box is placed.
    quadratic_base : bool
        Interpolate the departure of the potential from the Gaussian approximation's quadratic.
    **kwargs
        As for :class:`RNSHMC` (``exploration_steps``, ``path_length``, ``target_accept``,
        ``surrogate_target_accept``, NUTS options).

    Notes
    -----
    Sampler statistics: those of :class:`RNSHMC` plus ``steps_outside_domain``, the leapfrog
    steps of the draw that used the exact gradient because they were outside the box (also
    counted in ``n_gradient_evals``). The precomputation is reported in ``step.surrogate.report``
    and counts in the wall time of ``pm.sample``.

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
    # A sparse-grid gradient costs several times a network's, and the trajectory simulations
    # call it hundreds of thousands of times: shorter simulated chains keep the setup short.
    _simulated_draws = 100
    # The short exploration's integration times refer to a barely adapted mass matrix (as in
    # ARNSHMC): let the candidates reach a quarter oscillation in a whitening metric.
    _shortest_jump = 0.25

    def __init__(
        self,
        vars=None,
        *,
        level: int | None = None,
        max_points: int = DEFAULT_MAX_POINTS,
        mass: float = 0.999,
        domain: str = "laplace",
        quadratic_base: bool = True,
        **kwargs,
    ) -> None:
        max_points = check_positive_integer("max_points", max_points)
        self.mass = check_probability("mass", mass)
        if domain not in ("laplace", "exploration"):
            raise ValueError(f"domain must be 'laplace' or 'exploration', got {domain!r}.")
        for option in ("surrogate", "n_hidden", "hidden_units", "activation", "quadratic"):
            if option in kwargs:
                raise TypeError(f"SparseGridHMC does not take `{option}` (a RNSHMC option).")
        self.domain = domain
        self.quadratic_base = bool(quadratic_base)
        self.max_points = max_points
        self._requested_level = level
        super().__init__(vars, **kwargs)
        self.level = choose_level(self._exact_logp.size, level, max_points)

    def _start_chain(self) -> None:
        super()._start_chain()
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

    def _new_surrogate(self) -> SparseGridSurrogate:
        return SparseGridSurrogate(
            level=self.level,
            mass=self.mass,
            domain=self.domain,
            quadratic_base=self.quadratic_base,
            exact_potential=self._exact_potential_rows,
            exact_gradient=self._exact_potential_gradient,
        )

    @staticmethod
    def _describe_fit(report) -> str:
        return (
            f": a level-{report.level} sparse grid of {report.n_points} points in a "
            f"{report.domain} box (half-width {report.half_width:.2f}), {report.n_points} + "
            f"{report.n_laplace_evaluations} exact evaluations in {report.seconds:.2g} s, finest "
            f"surplus {report.finest_surplus:.2g}"
        )

    @staticmethod
    def _extra_metrics(surrogate: SparseGridSurrogate) -> tuple:
        # The box's Gaussian approximation (Laplace or exploration) is a dense metric candidate.
        factor = surrogate.box.factor
        try:
            return (DenseMetric(factor @ factor.T),)
        except np.linalg.LinAlgError:
            return ()

    @staticmethod
    def _simulation_surrogate(surrogate: SparseGridSurrogate) -> SparseGridSurrogate:
        # Outside the box the sampler uses exact evaluations; simulations use the quadratic
        # of the box's Gaussian approximation there instead, at no cost.
        return surrogate.extended_by_quadratic()

    def _exact_potential_rows(self, positions: np.ndarray) -> np.ndarray:
        return -np.array([self._exact_logp(position) for position in np.atleast_2d(positions)])

    def _exact_potential_gradient(self, position: np.ndarray) -> np.ndarray:
        return self._exact_potential_and_gradient(position)[1]

    def _surrogate_potential(self, position: np.ndarray, exact_logp: float) -> float:
        # eq. 3.11: the interpolant inside the box (NaN outside), the exact potential outside
        value = float(self.surrogate.potential(position))
        return value if np.isfinite(value) else -float(exact_logp)

    def astep(self, q0):
        q_new, (stats,) = super().astep(q0)
        stats["steps_outside_domain"] = self._exact_forces if stats["used_surrogate"] else 0
        return q_new, [stats]
