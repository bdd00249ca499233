"""SparseGridHMC: HMC whose trajectories follow a precomputed grid potential in a box."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from pymc_rnshmc._checks import (
    check_flag,
    check_positive_integer,
    check_positive_number,
    check_probability,
)
from pymc_rnshmc.exceptions import SurrogateWarning
from pymc_rnshmc.hmc.corrections import ApproximateMetropolis, Correction
from pymc_rnshmc.hmc.transition import DrawResult
from pymc_rnshmc.step_methods.evaluators import potentials_with
from pymc_rnshmc.step_methods.reporting import SURROGATE_HMC_STATS
from pymc_rnshmc.step_methods.schedule import SPARSE_GRID_SCHEDULE, Phase
from pymc_rnshmc.step_methods.surrogate_hmc import SurrogateHMC
from pymc_rnshmc.surrogates.grid.domain import DOMAINS, BoxSurrogate
from pymc_rnshmc.surrogates.grid.force_map import ForceMapSurrogate
from pymc_rnshmc.surrogates.grid.sizing import DEFAULT_MAX_POINTS, grid_size
from pymc_rnshmc.surrogates.grid.sparse_grid_surrogate import SparseGridSurrogate
from pymc_rnshmc.surrogates.network.options import NETWORK_OPTIONS

__all__ = ["MAX_GRID_ERROR", "SparseGridHMC"]

MAX_GRID_ERROR = 50.0
"""Default ``max_error``: grids that served well estimated at most 20 nats (the 20-d elliptic
PDE: 19.7, 4.3 times NUTS's ESS per second), grids that mixed badly 58 (40-d logistic
regression without the quadratic base: acceptance 0.09, ESS 27 of 1000), 122 to 3e5 (the 7-d
hierarchical model of the calibration runs: step size at its floor, trajectories at
max_steps, calibration failed) and 820 to 1.6e9 (the eight schools, Neal's funnel)."""

SPARSE_GRID_HMC_STATS: dict[str, tuple[Any, list | None]] = {
    **SURROGATE_HMC_STATS,
    "steps_outside_domain": (np.int64, []),
    "approximate_test": (bool, []),
}


class SparseGridHMC(SurrogateHMC):
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
    max_error : float, optional
        Largest estimated error of the grid's potential, in nats, that the sampler accepts
        (``step.surrogate.report.max_potential_error``: the largest finest-level surplus, or
        the largest ``|U - U~|`` at the exploration draws in the box if larger). A grid beyond
        it is refused with a warning and sampling continues with exact NUTS (the exact random
        walk for a model without gradients): such a grid proposes trajectories the exact test
        mostly rejects, so the chain, though still exact, mixes too slowly to trust. Default
        ``MAX_GRID_ERROR`` (50); ``None`` accepts every grid.
    exact_acceptance : bool
        ``False`` gives the paper's approximate "complete" variant (section 5): the Metropolis
        test uses the grid's potential inside the box, so a draw whose trajectory stays inside
        costs no exact evaluation at all, but the chain targets ``exp(-U~)`` instead of the
        posterior. It warns, and ``step.surrogate.report.kl_bound`` gives Theorem 5.1's bound
        ``2 max |U - U~|`` on the Kullback-Leibler divergence, estimated on the grid. It
        takes no ``safety_net``: the net's exact draws target the posterior, and mixed with
        draws that target ``exp(-U~)`` the chain would target neither, nor would the bound
        hold; the net is off (also for a model without gradients, where it is on by default).
    time_limit : float, optional
        Seconds after which an exact evaluation of the model is abandoned and counted as a
        rejection (stat ``model_failures``), as for :class:`~pymc_rnshmc.RNSHMC`; a grid node
        whose evaluation is abandoned is treated as a node where the model fails. The sampler
        then targets the posterior truncated to where the model finishes in time: harmless
        only where such points carry negligible mass (far out in a tail). Default ``None``: no
        limit.
    **kwargs
        As for :class:`~pymc_rnshmc.RNSHMC` (``exploration_steps``, ``path_length``,
        ``target_accept``, ``surrogate_target_accept``, ``weigh_costs``, NUTS options);
        ``surrogate_target_accept`` defaults to 0.9. With ``grid="full"`` the step size is
        adapted on the exact acceptance, towards ``surrogate_target_accept`` (0.8 by default
        there).

    Notes
    -----
    Sampler statistics: those of :class:`~pymc_rnshmc.RNSHMC` plus ``steps_outside_domain``, the
    leapfrog steps of the draw that used the exact gradient because they were outside the box (also
    counted in ``n_gradient_evals``), and ``approximate_test``, whether the draw's Metropolis
    test used the grid's potential (only with ``exact_acceptance=False``). The precomputation
    is reported in ``step.surrogate.report`` and counts in the wall time of ``pm.sample``.

    References
    ----------
    .. [1] Zhang, C., Shahbaba, B., & Zhao, H. (2017). Precomputing strategy for Hamiltonian
       Monte Carlo method based on regularity in parameter space. Computational Statistics,
       32(1), 253-279.
    .. [2] Bungartz, H.-J., & Griebel, M. (2004). Sparse grids. Acta Numerica, 13, 147-269.

    Examples
    --------
    >>> import pymc as pm
    >>> from pymc_rnshmc import SparseGridHMC
    >>> with pm.Model():
    ...     x = pm.Normal("x", 1, 2, shape=2)
    ...     step = SparseGridHMC(exploration_steps=100, weigh_costs=False)
    ...     idata = pm.sample(
    ...         step=step, tune=300, draws=200, chains=1, random_seed=1, progressbar=False,
    ...         compute_convergence_checks=False,
    ...     )
    >>> bool(abs(idata.posterior["x"].mean() - 1.0) < 0.3)
    True
    >>> bool(step.surrogate.report.max_potential_error < 0.1)  # the grid's error, in nats
    True
    """

    name = "sparse_grid_hmc"
    stats_dtypes_shapes = SPARSE_GRID_HMC_STATS
    _richer_surrogate = "the grid more points (max_points, or a higher level)"
    _refuses_coarse = "its surrogate interpolates the exact potential at the grid's nodes"

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
        max_error: float | None = MAX_GRID_ERROR,
        exact_acceptance: bool = True,
        time_limit: float | None = None,
        **kwargs,
    ) -> None:
        max_points = check_positive_integer("max_points", max_points)
        self.mass = check_probability("mass", mass)
        self.max_error = check_positive_number("max_error", max_error, allow_none=True)
        if domain not in DOMAINS:
            raise ValueError(f"domain must be one of {DOMAINS}, got {domain!r}.")
        if grid not in ("sparse", "full"):
            raise ValueError(f"grid must be 'sparse' or 'full', got {grid!r}.")
        for option in ("surrogate", *NETWORK_OPTIONS):
            if option in kwargs:
                raise TypeError(
                    f"SparseGridHMC does not take `{option}` (an option of RNSHMC's network)."
                )
        if kwargs.get("dynamics", "hmc") != "hmc":
            raise ValueError(
                "SparseGridHMC proposes with leapfrog trajectories only (dynamics='hmc'): its "
                "surrogate is defined inside a box, and a NUTS tree on the surrogate needs a "
                "potential defined everywhere. Use RNSHMC(dynamics='nuts') for that."
            )
        self.grid = grid
        self.domain = domain
        self.quadratic_base = check_flag("quadratic_base", quadratic_base)
        self.refine = check_flag("refine", refine)
        self.max_points = max_points
        self.exact_acceptance = check_flag("exact_acceptance", exact_acceptance)
        kwargs.setdefault("surrogate_target_accept", 0.8 if grid == "full" else 0.9)
        if not self.exact_acceptance:
            _refuse_safety_net(kwargs.get("safety_net"))
            kwargs["safety_net"] = 0.0
        super().__init__(
            vars,
            surrogate=None,
            schedule=SPARSE_GRID_SCHEDULE,
            time_limit=time_limit,
            **kwargs,
        )
        self.level, self.cells_per_dimension = grid_size(
            grid, self.exact_model.size, level, cells_per_dimension, self.refine, max_points
        )

    def _check_gradient_free(self, surrogate) -> None:
        if self.grid == "full":
            raise ValueError(
                "SparseGridHMC(grid='full') needs the gradient of the model's logp (its force "
                "map holds the exact gradient at each cell's centre), and this model has none: "
                "an Op in its logp defines no gradient. Use grid='sparse' or RNSHMC, which "
                "sample models without gradients."
            )

    def _new_surrogate(self) -> BoxSurrogate:
        options = {
            "mass": self.mass,
            "domain": self.domain,
            "max_error": self.max_error,
            "exact_potential": potentials_with(self.batch_evaluator, self.exact_model),
            "exact_potential_and_gradient": (
                None if self.gradient_free else self.exact_model.potential_and_gradient
            ),
        }
        if self.grid == "full":
            return ForceMapSurrogate(self.cells_per_dimension, **options)
        return SparseGridSurrogate(
            self.level,
            quadratic_base=self.quadratic_base,
            refine_to=self.max_points if self.refine else None,
            **options,
        )

    def _correction(self) -> Correction:
        if self.exact_acceptance or self.phase != Phase.SURROGATE:
            return super()._correction()
        return ApproximateMetropolis(self.surrogate.potential, self.Emax)

    def _after_fit(self) -> None:
        if self.exact_acceptance:
            return
        self._chain.cache = None  # the cached exact logp is not the approximate target's
        warnings.warn(
            "SparseGridHMC(exact_acceptance=False) uses the grid's potential in the "
            "Metropolis test inside the box, so the draws come from an approximation of the "
            "posterior, not the posterior itself. Kullback-Leibler divergence bound "
            f"2 max|U - U~| = {self.surrogate.report.kl_bound:.3g} (estimated on the grid "
            "and the exploration draws). Use exact_acceptance=True for exact draws.",
            SurrogateWarning,
            stacklevel=2,
        )

    def _after_draw(self, result: DrawResult | None) -> dict[str, Any]:
        if result is None:
            return {"steps_outside_domain": 0, "approximate_test": False}
        return {
            "steps_outside_domain": result.exact_forces,
            "approximate_test": result.approximate_test,
        }


def _refuse_safety_net(safety_net) -> None:
    """Raise unless the safety net is off: it cannot be mixed with the approximate test."""
    if safety_net is None or (not isinstance(safety_net, bool) and safety_net == 0):
        return
    raise ValueError(
        f"SparseGridHMC(exact_acceptance=False) takes no safety_net (got {safety_net!r}): the "
        "net's exact draws target the posterior while the approximate test targets the grid's "
        "exp(-U~), and a chain mixing the two targets neither. Use exact_acceptance=True with "
        "a safety net, or drop safety_net."
    )
