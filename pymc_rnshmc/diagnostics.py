"""A figure of how a surrogate sampler's surrogate did: fit, acceptance, surrogate error, cost.

:func:`plot_surrogate` takes the fitted step, the trace ``pm.sample`` returned, or both. From the
step: the surrogate's potential against the exact one at tuning points its final fit did not
train on. From the trace (tuning draws too, if it kept them): the exact and the surrogate's own
acceptance along the chain, how much the surrogate misjudged each proposal's energy change,
exact evaluations per draw, and for the grid sampler the steps its trajectories spent outside the
grid's box. Matplotlib, in ArviZ's default style when ArviZ provides one.
"""

from __future__ import annotations

import numpy as np

__all__ = ["plot_surrogate"]


def plot_surrogate(step=None, trace=None, *, window: int = 50, figsize=None):
    """Plot a surrogate sampler's diagnostics.

    Parameters
    ----------
    step : SurrogateHMC, optional
        A surrogate step after sampling (with ``cores=1`` it holds the last chain's fit).
    trace : InferenceData or DataTree, optional
        What ``pm.sample`` returned; with ``discard_tuned_samples=False`` tuning is shown too.
    window : int
        Draws of the moving averages along the chain.
    figsize : tuple, optional

    Returns
    -------
    matplotlib.figure.Figure
        Panels: ``surrogate vs exact`` (needs ``step``); ``acceptance``, ``surrogate error``,
        ``exact evaluations per draw`` and, for SparseGridHMC, ``steps outside the box`` (need
        ``trace``).

    Raises
    ------
    ValueError
        Neither is given, the step has no surrogate (it never fitted one), or the trace has no
        surrogate sampler's statistics.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> import pymc as pm
    >>> from pymc_rnshmc import RNSHMC, plot_surrogate
    >>> with pm.Model():
    ...     x = pm.Normal("x", 1, 2, shape=2)
    ...     step = RNSHMC(exploration_steps=100, weigh_costs=False)
    ...     idata = pm.sample(
    ...         step=step, tune=300, draws=200, chains=1, random_seed=1, progressbar=False,
    ...         compute_convergence_checks=False,
    ...     )
    >>> figure = plot_surrogate(step, idata)
    >>> [ax.get_title() for ax in figure.axes if ax.get_visible()]
    ['surrogate vs exact', 'acceptance', 'surrogate error', 'exact evaluations per draw']
    >>> plt.close(figure)
    """
    if step is None and trace is None:
        raise ValueError("plot_surrogate needs the fitted step, the trace, or both.")
    stats = None if trace is None else _chain_stats(trace)
    panels = []
    if step is not None:
        panels.append(("surrogate vs exact", lambda ax: _fit_panel(ax, step)))
    if stats is not None:
        panels += [
            ("acceptance", lambda ax: _acceptance_panel(ax, stats, window)),
            ("surrogate error", lambda ax: _error_panel(ax, stats)),
            ("exact evaluations per draw", lambda ax: _cost_panel(ax, stats, window)),
        ]
        if "steps_outside_domain" in stats["values"]:
            panels.append(("steps outside the box", lambda ax: _box_panel(ax, stats, window)))
    plt = _pyplot()
    with plt.style.context(_style(plt)):
        columns = 2 if len(panels) > 1 else 1
        rows = -(-len(panels) // columns)
        figure, axes = plt.subplots(
            rows, columns, figsize=figsize or (5.5 * columns, 3.4 * rows), squeeze=False
        )
        for ax, (title, draw) in zip(axes.flat, panels, strict=False):
            draw(ax)
            ax.set_title(title)
        for ax in axes.flat[len(panels) :]:
            ax.set_visible(False)
        if figure.get_layout_engine() is None:  # ArviZ's styles bring their own
            figure.tight_layout()
    return figure


# ----------------------------------------------------------------- data
def _chain_stats(trace) -> dict:
    """Per-chain stats along the chain: tuning draws (if kept) then the kept ones."""
    parts = [trace.sample_stats]
    tuning = _group(trace, "warmup_sample_stats")
    if tuning is not None:
        parts.insert(0, tuning)
    if "used_surrogate" not in parts[-1]:
        raise ValueError(
            "The trace has no surrogate sampler's statistics (used_surrogate); plot_surrogate "
            "reads the stats of RNSHMC, ARNSHMC, SparseGridHMC or RNSRMHMC."
        )
    names = [name for name in parts[-1].data_vars if name in parts[0].data_vars]
    values = {
        name: np.concatenate([np.asarray(part[name].values) for part in parts], axis=1)
        for name in names
        if np.asarray(parts[-1][name].values).dtype != object
    }
    n_tune = 0 if tuning is None else tuning.sizes["draw"]
    return {"values": values, "n_tune": n_tune}


def _group(trace, name: str):
    try:
        return trace[name] if name in trace.children else None  # xarray DataTree (PyMC 6)
    except AttributeError:
        return getattr(trace, name, None)  # arviz InferenceData (PyMC 5)


def _moving_average(values: np.ndarray, window: int) -> np.ndarray:
    values = np.asarray(values, dtype=float)
    window = max(1, min(window, values.shape[-1]))
    kernel = np.ones(window) / window
    return np.stack([np.convolve(row, kernel, mode="valid") for row in values])


# ----------------------------------------------------------------- panels
def _fit_panel(ax, step) -> None:
    surrogate = getattr(step, "surrogate", None)
    if surrogate is None:
        raise ValueError(
            "The step has no surrogate: it never fitted one (tuning too short, or it fell back "
            "to its exact sampler). See its warnings."
        )
    positions, exact = step.held_out_points()
    if len(positions) == 0:
        ax.text(
            0.5, 0.5, "every recorded point was trained on", ha="center", transform=ax.transAxes
        )
        return
    with np.errstate(all="ignore"):
        predicted = np.array([float(surrogate.potential(point)) for point in positions])
    finite = np.isfinite(predicted) & np.isfinite(exact)
    exact, predicted = exact[finite], predicted[finite]
    shift = np.median(predicted - exact)  # the surrogate's constant offset is arbitrary
    ax.scatter(exact - exact.min(), predicted - shift - exact.min(), s=8, alpha=0.6)
    limits = [0.0, float(np.max(exact - exact.min())) if len(exact) else 1.0]
    ax.plot(limits, limits, color="k", linewidth=0.8)
    ax.set_xlabel("exact U (held-out tuning points)")
    ax.set_ylabel("surrogate U~")


def _tuning_boundary(ax, stats) -> None:
    if stats["n_tune"]:
        ax.axvline(stats["n_tune"], color="0.5", linestyle=":", linewidth=1)


def _acceptance_panel(ax, stats, window: int) -> None:
    values = stats["values"]
    for chain, row in enumerate(_moving_average(np.nan_to_num(values["accept"]), window)):
        ax.plot(np.arange(row.size) + window, row, label=f"exact, chain {chain}")
    if "surrogate_accept" in values:
        own = values["surrogate_accept"]
        for chain in range(own.shape[0]):
            kept = np.isfinite(own[chain])
            label = "on the surrogate's own H, per draw" if chain == 0 else None
            ax.plot(
                np.flatnonzero(kept), own[chain][kept], ".", markersize=2, alpha=0.4, label=label
            )
    _tuning_boundary(ax, stats)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("draw")
    ax.set_ylabel(f"acceptance (moving mean of {window})")
    ax.legend(fontsize="x-small")


def _error_panel(ax, stats) -> None:
    errors = stats["values"]["surrogate_error"]
    for chain in range(errors.shape[0]):
        kept = np.isfinite(errors[chain])
        ax.plot(np.flatnonzero(kept), np.abs(errors[chain][kept]), ".", markersize=2)
    _tuning_boundary(ax, stats)
    ax.set_yscale("symlog", linthresh=0.01)
    ax.set_xlabel("draw")
    ax.set_ylabel("|surrogate error| (nats)")


def _cost_panel(ax, stats, window: int) -> None:
    values = stats["values"]
    for name, label in (("n_logp_evals", "logp"), ("n_gradient_evals", "gradient")):
        for chain, row in enumerate(_moving_average(values[name], window)):
            ax.plot(np.arange(row.size) + window, row, label=f"{label}, chain {chain}")
    _tuning_boundary(ax, stats)
    ax.set_yscale("symlog", linthresh=1)
    ax.set_xlabel("draw")
    ax.set_ylabel(f"per draw (moving mean of {window})")
    ax.legend(fontsize="x-small")


def _box_panel(ax, stats, window: int) -> None:
    for row in _moving_average(stats["values"]["steps_outside_domain"], window):
        ax.plot(np.arange(row.size) + window, row)
    _tuning_boundary(ax, stats)
    ax.set_xlabel("draw")
    ax.set_ylabel(f"steps outside (moving mean of {window})")


def _style(plt):
    for name in ("arviz-variat", "arviz-darkgrid"):
        if name in plt.style.available:
            return name
    return "default"


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError(
            "plot_surrogate needs matplotlib: pip install matplotlib (or the 'plots' extra)."
        ) from err
    return plt
