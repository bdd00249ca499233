"""How large a grid to build: the Smolyak level or the cells per axis that a budget allows."""

from __future__ import annotations

import numbers

from pymc_rnshmc._checks import check_positive_integer
from pymc_rnshmc.surrogates.grid.sparse_grid import SparseGrid

__all__ = [
    "DEFAULT_MAX_POINTS",
    "MAX_FULL_GRID_DIMENSION",
    "choose_cells",
    "choose_level",
    "grid_size",
]

DEFAULT_MAX_POINTS = 2000
MAX_FULL_GRID_DIMENSION = 3


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


def choose_cells(dim: int, cells: int | None, max_points: int) -> int:
    """Cells per dimension of a full grid: the requested number, or the most within budget.

    Raises
    ------
    ValueError
        More than three dimensions, fewer than three cells per dimension (too few to estimate
        the error), or more than ``max_points`` cells.
    """
    if dim > MAX_FULL_GRID_DIMENSION:
        raise ValueError(
            f"grid='full' evaluates the exact gradient on n^{dim} cell centres; it is meant for "
            f"at most {MAX_FULL_GRID_DIMENSION} parameters (here {dim}). Use grid='sparse', or "
            "RNSHMC for many parameters."
        )
    if cells is None:
        cells = 1
        while (cells + 1) ** dim <= max_points:
            cells += 1
        if cells < 3:
            raise ValueError(f"max_points={max_points} allows fewer than 3 cells per dimension.")
        return cells
    cells = check_positive_integer("cells_per_dimension", cells)
    if cells < 3:
        raise ValueError(f"cells_per_dimension must be at least 3, got {cells}.")
    if cells**dim > max_points:
        raise ValueError(
            f"{cells} cells per dimension in {dim} dimensions are {cells**dim} exact gradient "
            f"evaluations, more than max_points={max_points}. Lower `cells_per_dimension` or "
            "raise `max_points`."
        )
    return cells


def grid_size(
    grid: str,
    dim: int,
    level: int | None,
    cells_per_dimension: int | None,
    refine: bool,
    max_points: int,
) -> tuple[int | None, int | None]:
    """``(level, None)`` of a sparse grid or ``(None, cells per axis)`` of a full grid.

    Raises
    ------
    ValueError
        Options of the other kind of grid, ``level`` with ``refine``, or a grid over budget.
    """
    if grid == "sparse":
        if cells_per_dimension is not None:
            raise ValueError("cells_per_dimension is for grid='full'; use `level`.")
        if refine and level is not None:
            raise ValueError("refine=True chooses the grid adaptively; do not pass `level`.")
        return choose_level(dim, 1 if refine else level, max_points), None
    if level is not None or refine:
        raise ValueError("level and refine are for grid='sparse'; use `cells_per_dimension`.")
    return None, choose_cells(dim, cells_per_dimension, max_points)
