"""How fast each sampler's estimates converge in wall time: time to an ESS, error of the mean.

A sampler run gives a timeline: for every draw (tuning included) the seconds since the start
of the whole ``pm.sample`` call at which it was done. From it:

* ``time_to_ess``: when the post-tuning draws first reach a minimum bulk ESS (ArviZ, over every
  coordinate, as :mod:`pymc_rnshmc.comparison` measures it), checked on prefixes of the draws;
* ``relative_error_curve``: the relative error of the running posterior mean,
  ``sum_j |mean_j - reference_j| / sum_j |reference_j|`` (the RNS-HMC paper's REM, Figure 8),
  against the same clock;
* plots of those curves and of ARNSHMC's acceptance against the points in its estimator
  (the paper's Figure 7).
"""

from __future__ import annotations

import numpy as np

from pymc_rnshmc.comparison import coordinate_ess, posterior_coordinates


def pymc_chain_timelines(idata, call_start: float) -> np.ndarray:
    """``(chains, tune + draws)``: seconds since ``call_start`` at which each draw was done.

    From PyMC's per-draw ``perf_counter_start`` and ``perf_counter_diff``. ``time.perf_counter``
    is the system-wide monotonic clock on Linux, so chains sampled in worker processes
    (``cores > 1``) share the parent's time axis.
    """
    parts = []
    for group in ("warmup_sample_stats", "sample_stats"):
        stats = idata[group]
        parts.append(
            np.asarray(stats["perf_counter_start"].values)
            + np.asarray(stats["perf_counter_diff"].values)
        )
    return np.concatenate(parts, axis=1) - call_start


def pymc_timeline(idata, call_start: float) -> np.ndarray:
    """Seconds since ``call_start`` at which each draw (tuning, then sampling) was done.

    From PyMC's per-draw ``perf_counter_start`` and ``perf_counter_diff`` (one chain).
    """
    return pymc_chain_timelines(idata, call_start)[0]


def nutpie_timeline(idata, compile_seconds: float, loop_seconds: float) -> np.ndarray:
    """nutpie records no per-draw times: its loop time apportioned by leapfrog steps."""
    steps = np.concatenate(
        [
            np.asarray(idata.warmup_sample_stats["n_steps"].values)[0],
            np.asarray(idata.sample_stats["n_steps"].values)[0],
        ]
    ).astype(float)
    return compile_seconds + loop_seconds * np.cumsum(steps) / steps.sum()


def nutpie_chain_timelines(
    idata, compile_seconds: float, loop_seconds: float, observations: list
) -> np.ndarray:
    """``(chains, tune + draws)`` draw times of nutpie, from its progress reports.

    ``observations`` are ``(seconds since the start of the compile, finished draws of every
    chain)`` as nutpie's ``progress_callback`` reported them; the loop's start (no draws) and
    end (all draws) are added. The draws a chain finished between two reports are spread over
    that interval in proportion to their leapfrog steps. Unlike :func:`nutpie_timeline`, this
    sees that nutpie runs ``cores`` chains at a time (with 4 chains on 2 cores, chains 2 and 3
    start when 0 and 1 end).
    """
    steps = np.concatenate(
        [
            np.asarray(idata.warmup_sample_stats["n_steps"].values),
            np.asarray(idata.sample_stats["n_steps"].values),
        ],
        axis=1,
    ).astype(float)
    n_chains, n_total = steps.shape
    moments = np.array(
        [compile_seconds]
        + [moment for moment, _ in observations]
        + [compile_seconds + loop_seconds]
    )
    counts = np.array(
        [[0] * n_chains] + [list(c) for _, c in observations] + [[n_total] * n_chains]
    )
    order = np.argsort(moments, kind="stable")
    moments = np.clip(moments[order], compile_seconds, compile_seconds + loop_seconds)
    counts = np.maximum.accumulate(np.clip(counts[order], 0, n_total), axis=0)
    timelines = np.empty_like(steps)
    for chain in range(n_chains):
        work = np.concatenate([[0.0], np.cumsum(steps[chain])])
        timelines[chain] = _spread_by_work(work[1:], work[counts[:, chain]], moments)
    return timelines


def _spread_by_work(queries: np.ndarray, reported: np.ndarray, moments: np.ndarray) -> np.ndarray:
    """Times at which the cumulative work ``queries`` was reached, from reports of work done.

    ``reported`` (non-decreasing) is the work done by ``moments``. Work between two distinct
    reported values ``a < b`` is done between the last report of ``a`` and the first of ``b``,
    linearly in work.
    """
    values, first = np.unique(reported, return_index=True)
    last = len(reported) - 1 - np.unique(reported[::-1], return_index=True)[1]
    upper = np.clip(np.searchsorted(values, queries, side="left"), 1, len(values) - 1)
    low, high = values[upper - 1], values[upper]
    start, end = moments[last[upper - 1]], moments[first[upper]]
    return start + (end - start) * (queries - low) / (high - low)


def _flat_draws(posterior) -> np.ndarray:
    """``(draws, coordinates)`` of chain 0, every variable raveled, in a fixed order."""
    return posterior_coordinates(posterior)[0]


def min_bulk_ess(draws: np.ndarray) -> float:
    """Smallest ArviZ bulk ESS over the coordinates of ``(draws, coordinates)`` (one chain)."""
    return float(np.min(coordinate_ess(draws[None], "bulk")))


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


def _multichain_min_bulk_ess(draws: np.ndarray) -> float:
    """ArviZ min bulk ESS over the coordinates of ``(chains, draws, coordinates)``; NaN is 0."""
    return float(np.min(np.nan_to_num(coordinate_ess(draws, "bulk"))))


def _prefix_ess(draws: np.ndarray, counts: np.ndarray, minimum: int, cache: dict) -> float:
    """Best ArviZ min bulk ESS over the ``k`` chains with the most finished draws, for any ``k``.

    The ``k`` chains are cut to the ``k``-th one's count (ArviZ needs equal lengths); a count
    below ``minimum`` is not used.
    """
    order = np.argsort(-counts, kind="stable")
    best = 0.0
    for k in range(1, len(counts) + 1):
        length = int(counts[order[k - 1]])
        if length < minimum:
            break
        chosen = tuple(sorted(order[:k].tolist()))
        if (chosen, length) not in cache:
            cache[chosen, length] = _multichain_min_bulk_ess(draws[list(chosen), :length])
        best = max(best, cache[chosen, length])
    return best


def draw_wall_seconds(timelines: np.ndarray, n_draws: int, parallel: int) -> float:
    """Wall seconds of the post-tuning draws: every chain's span of them, over ``parallel``.

    A chain's span runs from its last tuning draw (or the call's start) to its last draw;
    ``parallel`` is how many chains ran at a time (``min(chains, cores)``).
    """
    timelines = np.atleast_2d(timelines)
    before = timelines[:, -n_draws - 1] if timelines.shape[1] > n_draws else 0.0
    return float(np.sum(timelines[:, -1] - before) / parallel)


def pooled_time_to_ess(
    posterior, timelines: np.ndarray, target: float, parallel: int = 1, every: int = 25
) -> dict:
    """When the post-tuning draws of all chains first reach a min bulk ESS of ``target``.

    ``timelines`` are ``(chains, tune + draws)`` seconds since the start of the call. Checked
    at the time of every ``every``-th post-tuning draw of all chains pooled in time order: the
    ESS then is ArviZ's multi-chain min bulk ESS of the draws finished so far, for the best
    ``k`` of the chains that had finished the most draws, each cut to the ``k``-th one's count
    (ArviZ needs chains of one length; with 4 chains on 2 cores the first two run alone for
    half the call). With one chain it is :func:`time_to_ess`'s check.

    If the target is not reached, ``extrapolated_seconds`` keeps the call's time before the
    post-tuning draws and scales their wall time (:func:`draw_wall_seconds`) by
    ``target / ess_at_end``, ``ess_at_end`` being the min bulk ESS of every draw of every chain:
    more draws at the same ESS per draw and seconds per draw.
    """
    draws = posterior_coordinates(posterior)
    n_draws = draws.shape[1]
    timelines = np.atleast_2d(timelines)
    sampling = timelines[:, -n_draws:]
    moments = np.sort(sampling, axis=None)
    checks = [*range(every, moments.size, every), moments.size]
    cache = {}
    for pooled in checks:
        counts = (sampling <= moments[pooled - 1]).sum(axis=1)
        if _prefix_ess(draws, counts, every, cache) >= target:
            seconds = float(moments[pooled - 1])
            return {"reached": True, "seconds": seconds, "pooled_draws": pooled}
    final = _multichain_min_bulk_ess(draws)
    span = draw_wall_seconds(timelines, n_draws, parallel)
    extrapolated = None
    if final > 0:
        extrapolated = float(timelines.max() - span + span * target / final)
    return {"reached": False, "ess_at_end": final, "extrapolated_seconds": extrapolated}
