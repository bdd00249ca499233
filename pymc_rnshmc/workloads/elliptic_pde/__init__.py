"""The papers' elliptic PDE inverse problem: a finite-element forward model and its PyMC models."""

from pymc_rnshmc.workloads.elliptic_pde.forward_model import (
    EllipticPDEForwardModel,
    KarhunenLoeveExpansion,
    SyntheticData,
    observation_points,
    synthetic_data,
)
from pymc_rnshmc.workloads.elliptic_pde.ops import elliptic_pde, sparse_grid_elliptic_pde

__all__ = [
    "EllipticPDEForwardModel",
    "KarhunenLoeveExpansion",
    "SyntheticData",
    "elliptic_pde",
    "observation_points",
    "sparse_grid_elliptic_pde",
    "synthetic_data",
]
