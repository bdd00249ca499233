"""Acceptance of surrogate-driven HMC proposals against hidden units, dimension and training size.

    python -m benchmarks.acceptance_studies                   # both figures, ~10-12 min
    python -m benchmarks.acceptance_studies --quick           # smoke, ~1 min
    python -m benchmarks.acceptance_studies --dims 8,16,32,50,64 --repeats 5

The RNS-HMC paper's Figures 4 and 5 on its simulated logistic regression
(``pymc_rnshmc.workloads.logistic_regression(n_obs, dim)``): the acceptance probability of
Hamiltonian proposals that follow a random network surrogate's gradient and are accepted by the
exact Metropolis test, as a function of the number of hidden units ``s`` for several dimensions
``d`` (Figure 4, trained on ``--train-points`` draws) and, for ``d = --training-dim`` (32 as in
the paper), of the number of training points (Figure 5).

Instead of a full ``pm.sample`` per setting, each dimension gets one PyMC NUTS run; its draws
after tuning are split into a training pool and ``--n-test`` held-out start points (the last
draws). Exact potentials and gradients of the pool come from the compiled model. Per setting
the surrogate is fitted directly on (a random subset of) the pool, and from every held-out
start one proposal is made: momentum ``p ~ N(0, M)`` with ``M`` the inverse of the pool's
covariance, leapfrog on the surrogate gradient (:func:`pymc_rnshmc.hmc.leapfrog.leapfrog`) for a
fixed integration time ``--integration-time`` (default pi/2 in the whitened coordinates the
mass matrix defines: a quarter period of the Gaussian approximation, the path that carries a
proposal farthest), with the step count the smallest for which exact-gradient leapfrog has a
mean acceptance probability of at least ``--exact-accept`` (0.9) on the first 50 starts. The
reported acceptance is the mean of ``min(1, exp(-dH))`` with the exact ``H`` over the held-out
starts, averaged over ``--repeats`` fits (new hidden layer, new training subset); every
surrogate sees the same starts and momenta, and exact-gradient HMC with the same step count is
the reference line.

Surrogates: the paper's fit (``ValuesOnly`` from ``benchmarks.surrogate_design``: softplus
units, no quadratic base, exact potentials only) and the project's default design (quadratic
base fitted to gradients, network fitted to the residual values and gradients) at each width,
plus the default with its width chosen on held-out points. Writes
``benchmarks/results/acceptance_studies.{json,md}``, ``docs/figures/acceptance-vs-hidden-units.png``
and ``docs/figures/acceptance-vs-training-points.png``.
"""

from __future__ import annotations

import os

os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ["MKL_NUM_THREADS"] = "1"

import argparse
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pymc as pm

from benchmarks.measure import run_metadata, write_results
from benchmarks.surrogate_design import ValuesOnly
from pymc_rnshmc import RandomNetworkSurrogate, SurrogateFitError
from pymc_rnshmc.comparison import run_sampler
from pymc_rnshmc.hmc.leapfrog import leapfrog
from pymc_rnshmc.step_methods.exact_model import ExactModel
from pymc_rnshmc.workloads import logistic_regression

FIGURES = Path(__file__).parents[1] / "docs" / "figures"
VARIANTS = {
    "values only (paper)": lambda s: ValuesOnly(n_hidden=s, quadratic=False, weight_scale=1.0),
    "quadratic + network, values and gradients (default)": lambda s: RandomNetworkSurrogate(
        n_hidden=s
    ),
}
VARIANTS_PAPER = next(iter(VARIANTS))
AUTO = "default, width chosen on held-out points"
TUNING_STARTS = 50
MAX_STEPS = 200


class ExactPosterior:
    """Exact potential ``U = -logp`` and its gradient on the raveled parameter vector."""

    def __init__(self, model) -> None:
        self.exact = ExactModel(model, model.continuous_value_vars, dtype="float64")

    def potential(self, position: np.ndarray) -> float:
        return -self.exact.logp(position)

    def potential_and_gradient(self, position: np.ndarray) -> tuple[float, np.ndarray]:
        return self.exact.potential_and_gradient(position)

    def gradient(self, position: np.ndarray) -> np.ndarray:
        return self.potential_and_gradient(position)[1]


class Workload:
    """One dimension's NUTS draws, exact evaluations, held-out starts, momenta and step count."""

    def __init__(self, dim: int, n_pool: int, args) -> None:
        start = time.perf_counter()
        self.dim = dim
        model = logistic_regression(n_obs=args.n_obs, dim=dim)
        nuts = run_sampler(
            pm.NUTS,
            model,
            tune=args.tune,
            draws=n_pool + args.n_test,
            chains=1,
            random_seed=args.seed,
            progressbar=False,
        )
        draws = np.asarray(nuts.trace.posterior["beta"].values[0])
        self.nuts_seconds = nuts.whole_call_seconds
        self.exact = ExactPosterior(model)
        pool, tests = draws[:n_pool], draws[n_pool:]
        evaluated = [self.exact.potential_and_gradient(q) for q in pool]
        self.pool = pool
        self.pool_potentials = np.array([u for u, _ in evaluated])
        self.pool_gradients = np.stack([g for _, g in evaluated])
        self.tests = tests
        evaluated = [self.exact.potential_and_gradient(q) for q in tests]
        self.test_potentials = np.array([u for u, _ in evaluated])
        self.test_gradients = np.stack([g for _, g in evaluated])

        # Mass matrix M = inverse covariance: velocity = covariance @ p, p = L^-T xi.
        self.covariance = np.cov(pool, rowvar=False)
        factor = np.linalg.cholesky(self.covariance)
        rng = np.random.default_rng([args.seed, dim])
        noise = rng.standard_normal(tests.shape)
        self.momenta = np.linalg.solve(factor.T, noise.T).T
        self.kinetic = 0.5 * np.sum(noise**2, axis=1)
        self.n_steps, self.step_size, self.exact_acceptance = self._choose_steps(args)
        self.setup_seconds = time.perf_counter() - start

    def velocity(self, momentum: np.ndarray) -> np.ndarray:
        return self.covariance @ momentum

    def acceptance(self, gradient, n_steps: int, step_size: float, starts=None) -> np.ndarray:
        """``min(1, exp(-dH))`` of one proposal from each held-out start, exact ``H``."""
        indices = range(len(self.tests)) if starts is None else range(starts)
        probabilities = np.zeros(len(indices))
        for k in indices:
            trajectory = leapfrog(
                self.tests[k],
                self.momenta[k],
                gradient(self.tests[k]),
                step_size,
                n_steps,
                gradient,
                self.velocity,
            )
            if trajectory.failed:
                continue
            end = self.exact.potential(trajectory.position)
            velocity = self.velocity(trajectory.momentum)
            change = end + 0.5 * trajectory.momentum @ velocity
            change -= self.test_potentials[k] + self.kinetic[k]
            probabilities[k] = float(np.exp(min(0.0, -change))) if np.isfinite(change) else 0.0
        return probabilities

    def _choose_steps(self, args) -> tuple[int, float, float]:
        """Fewest steps over the integration time with exact-gradient acceptance >= target."""
        starts = min(TUNING_STARTS, len(self.tests))
        for n_steps in range(1, MAX_STEPS + 1):
            step_size = args.integration_time / n_steps
            mean = self.acceptance(self.exact.gradient, n_steps, step_size, starts).mean()
            if mean >= args.exact_accept:
                break
        exact = self.acceptance(self.exact.gradient, n_steps, step_size).mean()
        return n_steps, step_size, float(exact)

    def evaluate(self, surrogate, chosen: np.ndarray, rng: np.random.Generator) -> dict:
        """Fit ``surrogate`` on the pool points ``chosen``; its acceptance and held-out errors."""
        start = time.perf_counter()
        try:
            surrogate.fit(
                self.pool[chosen], self.pool_potentials[chosen], self.pool_gradients[chosen], rng
            )
        except SurrogateFitError as error:
            return {"acceptance": float("nan"), "error": str(error)}
        fit_seconds = time.perf_counter() - start
        probabilities = self.acceptance(surrogate.gradient, self.n_steps, self.step_size)
        predicted = surrogate.gradient(self.tests)
        # Relative gradient error in the whitened coordinates of the posterior covariance.
        factor = np.linalg.cholesky(self.covariance)
        exact = self.test_gradients @ factor
        spread = np.mean(np.sum((exact - exact.mean(axis=0)) ** 2, axis=1))
        error = np.mean(np.sum(((predicted - self.test_gradients) @ factor) ** 2, axis=1))
        return {
            "acceptance": float(probabilities.mean()),
            "n_hidden": int(surrogate.report.n_hidden),
            "fit_seconds": fit_seconds,
            "test_gradient_error": float(np.sqrt(error / spread)),
        }


def study(workload: Workload, figure: str, sizes, widths, args, rows: list) -> None:
    """Every (training size, width, variant) of one figure, ``--repeats`` times."""
    for n_train in sizes:
        for repeat in range(args.repeats):
            # One training subset per repeat, and one hidden-layer draw per width, shared by
            # the variants.
            key = [args.seed, workload.dim, n_train, repeat]
            subset = np.random.default_rng(key).choice(len(workload.pool), n_train, False)
            subset.sort()
            settings = [(name, s) for s in widths for name in VARIANTS] + [(AUTO, None)]
            for name, width in settings:
                surrogate = RandomNetworkSurrogate() if width is None else VARIANTS[name](width)
                rng = np.random.default_rng([*key, width or 0])
                result = workload.evaluate(surrogate, subset, rng)
                row = {
                    "figure": figure,
                    "dim": workload.dim,
                    "n_train": n_train,
                    "variant": name,
                    "s": width,
                    "repeat": repeat,
                } | result
                rows.append(row)
        done = [r for r in rows if r["figure"] == figure and r["n_train"] == n_train]
        done = [r for r in done if r["dim"] == workload.dim]
        print(
            f"{figure}: d={workload.dim} N={n_train}: "
            + ", ".join(
                f"{r['variant'][:6]} s={r['s']} {r['acceptance']:.2f}"
                for r in done
                if r["repeat"] == 0
            ),
            flush=True,
        )


def mean_table(rows: list, figure: str, key: str, keys: list, widths: list) -> dict:
    """Mean acceptance per (variant, key value, width) over repeats."""
    table = {}
    for name in [*VARIANTS, AUTO]:
        for value in keys:
            for width in widths if name != AUTO else [None]:
                picked = [
                    r
                    for r in rows
                    if r["figure"] == figure
                    and r["variant"] == name
                    and r[key] == value
                    and r["s"] == width
                ]
                if picked:
                    table[name, value, width] = {
                        "acceptance": float(np.nanmean([r["acceptance"] for r in picked])),
                        "n_hidden": float(np.mean([r.get("n_hidden", np.nan) for r in picked])),
                        "test_gradient_error": float(
                            np.nanmean([r.get("test_gradient_error", np.nan) for r in picked])
                        ),
                    }
    return table


def plot(table: dict, reference: dict, keys: list, widths: list, by_width: bool, path, args):
    """One panel per variant: acceptance against s (one line per d) or against N (per s)."""
    figure, axes = plt.subplots(1, len(VARIANTS), figsize=(12, 4.3), sharey=True)
    colours = plt.cm.viridis(np.linspace(0.0, 0.85, len(keys) if by_width else len(widths)))
    for ax, name in zip(axes, VARIANTS, strict=True):
        if by_width:  # Figure 4: x = s, a line per d
            for colour, value in zip(colours, keys, strict=True):
                y = [table[name, value, s]["acceptance"] for s in widths]
                ax.plot(widths, y, "o-", color=colour, label=f"d = {value}")
                ax.axhline(reference[value], color=colour, linestyle=":", linewidth=1)
                auto = table.get((AUTO, value, None))
                if auto and name != VARIANTS_PAPER:
                    ax.plot(auto["n_hidden"], auto["acceptance"], "*", color=colour, ms=12)
            ax.set_xlabel("hidden units s")
        else:  # Figure 5: x = N, a line per s
            for colour, s in zip(colours, widths, strict=True):
                y = [table[name, value, s]["acceptance"] for value in keys]
                ax.plot(keys, y, "o-", color=colour, label=f"s = {s}")
            auto = [table.get((AUTO, value, None)) for value in keys]
            if name != VARIANTS_PAPER and all(auto):
                ax.plot(keys, [a["acceptance"] for a in auto], "k*--", label="s chosen (default)")
            ax.axhline(reference, color="grey", linestyle=":", label="exact-gradient HMC")
            ax.set_xlabel("training points N")
        ax.set_xscale("log")
        ticks = widths if by_width else keys
        ax.set_xticks(ticks, [str(t) for t in ticks], minor=False)
        ax.set_xticks([], minor=True)
        ax.set_title(name, fontsize=10)
        ax.set_ylim(-0.02, 1.02)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    axes[0].set_ylabel("acceptance probability")
    if by_width:
        title = (
            f"Acceptance vs hidden units (paper Fig. 4): logistic regression, n_obs = "
            f"{args.n_obs}, {args.train_points} training points; dotted: exact-gradient HMC; "
            "stars: default width"
        )
    else:
        title = (
            f"Acceptance vs training points (paper Fig. 5): logistic regression, "
            f"d = {args.training_dim}, n_obs = {args.n_obs}"
        )
    figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)


def _acceptance_table(table: dict, label: str, rows: list, widths: list) -> list[str]:
    """Markdown rows of acceptance per surrogate and ``label`` value, one column per width."""
    lines = [
        f"| surrogate | {label} | " + " | ".join(f"s = {s}" for s in widths) + " | default |",
        "|---|---|" + "---|" * (len(widths) + 1),
    ]
    for name in VARIANTS:
        for row in rows:
            cells = [f"{table[name, row, s]['acceptance']:.2f}" for s in widths]
            auto = table.get((AUTO, row, None))
            default = (
                f"{auto['acceptance']:.2f} (s = {auto['n_hidden']:.0f})"
                if auto and name != VARIANTS_PAPER
                else ""
            )
            lines.append(f"| {name} | {row} | " + " | ".join(cells) + f" | {default} |")
    return lines


def markdown(meta: dict, table4: dict, table5: dict, workloads: dict) -> str:
    widths, dims = meta["widths"], meta["dims"]
    sizes, training_dim = meta["training_sizes"], meta["training_dim"]
    lines = [
        f"### Acceptance studies (RNS-HMC paper Figures 4 and 5), {meta['date']}",
        "",
        f"pymc {meta['pymc']}; {meta['machine']}; logistic regression with n_obs = "
        f"{meta['n_obs']}; NUTS tune {meta['tune']}, seed {meta['seed']}; {meta['n_test']} "
        f"held-out starts, mean of min(1, exp(-dH)) averaged over {meta['repeats']} fits; "
        f"integration time {meta['integration_time']:.3f} (whitened units).",
        "",
        "| d | NUTS s | leapfrog steps | step size | exact-gradient HMC acceptance |",
        "|---|---|---|---|---|",
    ]
    for dim, w in workloads.items():
        lines.append(
            f"| {dim} | {w['nuts_seconds']:.1f} | {w['n_steps']} | {w['step_size']:.3f} | "
            f"{w['exact_acceptance']:.2f} |"
        )
    lines += [
        "",
        f"Figure 4: acceptance against hidden units s, {meta['train_points']} training points.",
        "",
    ]
    lines += _acceptance_table(table4, "d", dims, widths)
    lines += [
        "",
        f"Figure 5: acceptance against training points N, d = {training_dim}.",
        "",
    ]
    lines += _acceptance_table(table5, "N", sizes, widths)
    lines += [
        "",
        "Held-out gradient error (relative RMS, whitened) of the Figure 4 fits at the widest s: "
        + "; ".join(
            f"{name.split(' (')[0]}, d = {dim}: "
            f"{table4[name, dim, widths[-1]]['test_gradient_error']:.3f}"
            for name in VARIANTS
            for dim in dims
        ),
    ]
    return "\n".join(lines) + "\n"


def integers(text: str) -> list[int]:
    return [int(value) for value in text.split(",")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dims", type=integers, default=integers("8,16,32,50"))
    parser.add_argument("--widths", type=integers, default=integers("50,100,250,500,1000,2000"))
    parser.add_argument("--train-points", type=int, default=2000, help="Figure 4's training N")
    parser.add_argument("--training-dim", type=int, default=32, help="Figure 5's d")
    parser.add_argument(
        "--training-sizes", type=integers, default=integers("100,200,400,800,1600,3200")
    )
    parser.add_argument("--n-obs", type=int, default=10_000)
    parser.add_argument("--n-test", type=int, default=200, help="held-out start points")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--integration-time", type=float, default=np.pi / 2)
    parser.add_argument("--exact-accept", type=float, default=0.9)
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, ~1 min smoke")
    args = parser.parse_args()
    if args.quick:
        args.dims, args.widths, args.training_dim = [4, 8], [50, 200, 500], 8
        args.train_points, args.training_sizes = 300, [50, 100, 300]
        args.n_obs, args.n_test, args.repeats, args.tune = 2000, 40, 1, 300

    start = time.perf_counter()
    rows, workloads, reference4 = [], {}, {}
    dims = sorted(set(args.dims) | {args.training_dim})
    for dim in dims:
        n_pool = args.train_points
        if dim == args.training_dim:
            n_pool = max(n_pool, max(args.training_sizes))
        workload = Workload(dim, n_pool, args)
        workloads[dim] = {
            "nuts_seconds": workload.nuts_seconds,
            "setup_seconds": workload.setup_seconds,
            "n_steps": workload.n_steps,
            "step_size": workload.step_size,
            "exact_acceptance": workload.exact_acceptance,
        }
        print(f"d={dim}: {workloads[dim]}", flush=True)
        reference4[dim] = workload.exact_acceptance
        if dim in args.dims:
            study(workload, "figure4", [args.train_points], args.widths, args, rows)
        if dim == args.training_dim:
            study(workload, "figure5", args.training_sizes, args.widths, args, rows)

    table4 = mean_table(rows, "figure4", "dim", args.dims, args.widths)
    table5 = mean_table(rows, "figure5", "n_train", args.training_sizes, args.widths)
    plot(
        table4,
        reference4,
        args.dims,
        args.widths,
        True,
        FIGURES / "acceptance-vs-hidden-units.png",
        args,
    )
    plot(
        table5,
        reference4[args.training_dim],
        args.training_sizes,
        args.widths,
        False,
        FIGURES / "acceptance-vs-training-points.png",
        args,
    )
    meta = run_metadata(
        **{
            "dims": args.dims,
            "widths": args.widths,
            "train_points": args.train_points,
            "training_dim": args.training_dim,
            "training_sizes": args.training_sizes,
            "n_obs": args.n_obs,
            "n_test": args.n_test,
            "repeats": args.repeats,
            "integration_time": args.integration_time,
            "exact_accept": args.exact_accept,
            "tune": args.tune,
            "seed": args.seed,
            "quick": args.quick,
        }
    )
    text = markdown(meta, table4, table5, workloads)
    meta["wall_seconds"] = time.perf_counter() - start
    write_results("acceptance_studies", meta | {"workloads": workloads, "rows": rows}, text)
    print(text)
    print(f"{meta['wall_seconds']:.0f} s", flush=True)


if __name__ == "__main__":
    main()
