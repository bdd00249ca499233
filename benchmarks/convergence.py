"""How fast each sampler's estimates converge in wall time: time to an ESS, error of the mean.

A sampler run gives a timeline: for every draw (tuning included) the seconds since the start
of the whole ``pm.sample`` call at which it was done. From it:

* ``time_to_ess``: when the post-tuning draws first reach a minimum bulk ESS (ArviZ, over every
  coordinate), checked on prefixes of the draws;
* ``relative_error_curve``: the relative error of the running posterior mean,
  ``sum_j |mean_j - reference_j| / sum_j |reference_j|`` (the RNS-HMC paper's REM, Figure 8),
  against the same clock;
* plots of those curves and of ARNSHMC's acceptance against the points in its estimator
  (the paper's Figure 7).
"""

from __future__ import annotations

import arviz as az
import numpy as np
import xarray as xr


def pymc_timeline(idata, call_start: float) -> np.ndarray:
    """Seconds since ``call_start`` at which each draw (tuning, then sampling) was done.

    From PyMC's per-draw ``perf_counter_start`` and ``perf_counter_diff`` (one chain).
    """
    parts = []
    for group in ("warmup_sample_stats", "sample_stats"):
        stats = idata[group]
        end = np.asarray(stats["perf_counter_start"].values) + np.asarray(
            stats["perf_counter_diff"].values
        )
        parts.append(end[0])
    return np.concatenate(parts) - call_start


def nutpie_timeline(idata, compile_seconds: float, loop_seconds: float) -> np.ndarray:
    """nutpie records no per-draw times: its loop time apportioned by leapfrog steps."""
    steps = np.concatenate(
        [
            np.asarray(idata.warmup_sample_stats["n_steps"].values)[0],
            np.asarray(idata.sample_stats["n_steps"].values)[0],
        ]
    ).astype(float)
    return compile_seconds + loop_seconds * np.cumsum(steps) / steps.sum()


def _flat_draws(posterior) -> np.ndarray:
    """``(draws, coordinates)`` of chain 0, every variable raveled, in a fixed order."""
    columns = []
    for name in sorted(posterior.data_vars):
        values = np.asarray(posterior[name].values)[0]
        columns.append(values.reshape(values.shape[0], -1))
    return np.concatenate(columns, axis=1)


def min_bulk_ess(draws: np.ndarray) -> float:
    """Smallest ArviZ bulk ESS over the coordinates of ``(draws, coordinates)`` (one chain)."""
    dataset = xr.Dataset({"x": (("chain", "draw", "coordinate"), draws[None])})
    return float(np.min(az.ess(dataset, method="bulk")["x"].values))


def time_to_ess(posterior, timeline: np.ndarray, target: float, every: int = 25) -> dict:
    """Wall time at which the post-tuning draws first reach a min bulk ESS of ``target``.

    Prefixes of ``every`` draws are checked. If the run ends first, the time is extrapolated
    at the run's final ESS per draw and seconds per draw, and flagged.
    """
    draws = _flat_draws(posterior)
    n_draws = draws.shape[0]
    sampling = timeline[-n_draws:]
    for count in range(every, n_draws + 1, every):
        ess = min_bulk_ess(draws[:count])
        if ess >= target:
            return {"seconds": float(sampling[count - 1]), "draws": count, "extrapolated": False}
    ess = min_bulk_ess(draws)
    seconds_per_draw = (sampling[-1] - sampling[0]) / max(n_draws - 1, 1)
    needed = target / max(ess / n_draws, 1e-12)
    return {
        "seconds": float(sampling[-1] + (needed - n_draws) * seconds_per_draw),
        "draws": int(np.ceil(needed)),
        "extrapolated": True,
    }


def reference_means(posteriors: dict) -> np.ndarray:
    """Posterior means pooled over every sampler's post-tuning draws."""
    return np.concatenate([_flat_draws(p) for p in posteriors.values()]).mean(axis=0)


def relative_error_curve(posterior, timeline: np.ndarray, reference: np.ndarray) -> dict:
    """Relative error of the running posterior mean against wall time (REM, paper Fig. 8)."""
    draws = _flat_draws(posterior)
    running = np.cumsum(draws, axis=0) / np.arange(1, draws.shape[0] + 1)[:, None]
    error = np.abs(running - reference).sum(axis=1) / np.abs(reference).sum()
    return {"seconds": timeline[-draws.shape[0] :].tolist(), "relative_error": error.tolist()}


def plot_relative_error(curves: dict, path, title: str) -> None:
    """REM against wall time for every sampler (log-log), as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6.5, 4.2))
    for name, curve in curves.items():
        axes.plot(curve["seconds"], curve["relative_error"], label=name, linewidth=1.4)
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("seconds since the start of the sampling call")
    axes.set_ylabel("relative error of the posterior mean")
    axes.set_title(title, fontsize=10)
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def acceptance_by_points(idata, window: int = 50) -> dict:
    """ARNSHMC's acceptance probability against the points in its estimator.

    Surrogate draws only (tuning and sampling), smoothed by a moving average over ``window``.
    """
    accept, points, used = [], [], []
    for group in ("warmup_sample_stats", "sample_stats"):
        stats = idata[group]
        accept.append(np.asarray(stats["accept"].values)[0])
        points.append(np.asarray(stats["estimator_points"].values)[0])
        used.append(np.asarray(stats["used_surrogate"].values)[0])
    used = np.concatenate(used)
    accept = np.concatenate(accept)[used]
    points = np.concatenate(points)[used]
    kernel = np.ones(window) / window
    smoothed = np.convolve(accept, kernel, mode="valid")
    return {
        "points": points[window - 1 :].tolist(),
        "acceptance": smoothed.tolist(),
        "first_acceptance": float(accept[:window].mean()),
        "last_acceptance": float(accept[-window:].mean()),
    }


def plot_acceptance(curve: dict, path, title: str) -> None:
    """Acceptance against estimator points (paper Fig. 7), as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6.5, 4.0))
    # batch refits during tuning restart the count from their training window
    axes.plot(curve["points"], curve["acceptance"], ".", markersize=2)
    axes.set_xlabel("exact evaluations in the online estimator")
    axes.set_ylabel("acceptance (mean of 50 draws)")
    axes.set_ylim(0, 1.02)
    axes.set_title(title, fontsize=10)
    axes.grid(True, alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
