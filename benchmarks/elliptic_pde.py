"""PyMC NUTS against the surrogate samplers on the elliptic PDE inverse problem, in one run.

    python -m benchmarks.elliptic_pde                         # both settings, 30 x 30 mesh
    python -m benchmarks.elliptic_pde --meshes 30,60          # and again on a 60 x 60 mesh
    python -m benchmarks.elliptic_pde --draws 100 --tune 200 --arnshmc-tune 200   # smoke
    python -m benchmarks.elliptic_pde --settings d20 --samplers "PyMC NUTS,RNSHMC" \
        --path-lengths 1.6,2.3,2.7,3.2 --output elliptic_pde_path_lengths   # bulk/tail trade-off

Two settings of :mod:`pymc_rnshmc.workloads.elliptic_pde.ops`: the RNS-HMC paper's (section 5.2,
``elliptic_pde()``: d = 20 Karhunen-Loeve weights, prior sd 0.5) with PyMC NUTS, ``RNSHMC`` and
``ARNSHMC``, and the sparse-grid HMC paper's (section 4.4, ``sparse_grid_elliptic_pde()``: d = 5,
prior sd 1) with PyMC NUTS and ``SparseGridHMC``. One chain, seed 1, ``tune=1000, draws=1000``;
ARNSHMC with ``--arnshmc-tune`` (500) as in ``benchmarks.run_benchmarks``. Every setting runs on
each mesh of ``--meshes`` (default ``--n-cells``, 30 cells per side as in the paper).

Reported per setting, mesh and sampler: seconds per forward solve (the compiled logp) and per
solve plus adjoint (logp and gradient), timed at distinct points so the forward model's cache
of the last factorization is never hit; exact solves (logp evaluations) and adjoint solves
(gradients) per draw after tuning; min bulk ESS, min bulk ESS per second of the draws after
tuning and of the whole ``pm.sample`` call (its clock started before the step is built) and
their ratios to NUTS; acceptance; and the largest difference of posterior means from NUTS in
Monte Carlo standard errors (the measurements of :mod:`pymc_rnshmc.comparison`). Writes
``benchmarks/results/elliptic_pde.{json,md}`` and ``docs/figures/elliptic-pde-field.png`` (true
log-diffusivity next to the d = 20 posterior means of NUTS and RNSHMC, and NUTS's posterior sd,
on the first mesh).
"""

from __future__ import annotations

import os

os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ["MKL_NUM_THREADS"] = "1"

import argparse
from functools import partial
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pymc as pm

from benchmarks.measure import (
    compare_with_nuts,
    evaluation_costs,
    run,
    run_metadata,
    write_results,
)
from pymc_rnshmc import ARNSHMC, RNSHMC, SparseGridHMC
from pymc_rnshmc.workloads.elliptic_pde import elliptic_pde, sparse_grid_elliptic_pde
from pymc_rnshmc.workloads.elliptic_pde.forward_model import (
    KarhunenLoeveExpansion,
    observation_points,
    synthetic_data,
)

FIGURES = Path(__file__).parents[1] / "docs" / "figures"
FIELD_FIGURE = FIGURES / "elliptic-pde-field.png"
SETTINGS = {
    "d20": {
        "label": "d = 20, prior sd 0.5 (RNS-HMC paper 5.2)",
        "build": lambda n_cells: elliptic_pde(n_cells=n_cells),
        "samplers": {"PyMC NUTS": pm.NUTS, "RNSHMC": RNSHMC, "ARNSHMC": ARNSHMC},
    },
    "d5": {
        "label": "d = 5, prior sd 1 (sparse-grid HMC paper 4.4)",
        "build": lambda n_cells: sparse_grid_elliptic_pde(n_cells=n_cells),
        "samplers": {"PyMC NUTS": pm.NUTS, "SparseGridHMC": SparseGridHMC},
    },
}
TRUTH = {"n_modes": 20, "prior_sd": 0.5}
"""The d = 20 setting's data-generating weights: ``elliptic_pde()``'s defaults."""


def run_setting(setting: str, n_cells: int, args) -> tuple[dict, dict]:
    """All samplers of one setting on one mesh; the report and the posteriors."""
    spec = SETTINGS[setting]
    model = spec["build"](n_cells)
    measured = evaluation_costs(model, repeats=100)
    costs = {
        "solve_seconds": measured["logp_seconds"],
        "solve_adjoint_seconds": measured["logp_gradient_seconds"],
    }
    print(
        f"\n== {setting}, {n_cells} x {n_cells} mesh: solve {costs['solve_seconds'] * 1e3:.3f} ms,"
        f" solve + adjoint {costs['solve_adjoint_seconds'] * 1e3:.3f} ms",
        flush=True,
    )
    samplers = {name: spec["samplers"][name] for name in spec["samplers"]}
    if "RNSHMC" in samplers:
        for length in args.path_lengths:
            samplers[f"RNSHMC, path length {length:g}"] = partial(RNSHMC, path_length=length)
    wanted = args.samplers.split(",")
    chosen = [name for name in samplers if name in wanted or name.startswith("RNSHMC, path")]
    results, runs = {}, {}
    for name in chosen:
        tune = args.arnshmc_tune if name == "ARNSHMC" else args.tune
        runs[name], result = run(
            model, name, samplers[name], tune=tune, draws=args.draws, chains=1, seed=args.seed
        )
        result.pop("timeline", None)
        result["tune"] = tune
        result["seconds_per_draw"] = result["sampling_seconds"] / args.draws
        result["draw_cost_in_solves"] = result["seconds_per_draw"] / costs["solve_seconds"]
        results[name] = result
        print(
            f"{name}: min bulk ESS {result['min_bulk_ess']:.0f}, accept {result['accept']:.2f}, "
            f"{result['logps_per_draw']:.1f} solves and {result['gradients_per_draw']:.1f} "
            f"adjoints per draw, {result['ess_per_second']:.1f} ESS/s of draws, "
            f"wall {result['wall_seconds']:.1f} s",
            flush=True,
        )
    if "PyMC NUTS" in results:
        compare_with_nuts(results, runs)
    report = {
        "setting": setting,
        "label": spec["label"],
        "n_cells": n_cells,
        "costs": costs,
        "results": results,
    }
    return report, {name: sampled.trace.posterior for name, sampled in runs.items()}


def theta_draws(posterior) -> np.ndarray:
    """Post-tuning draws of ``theta`` of every chain, ``(n, d)``."""
    values = np.asarray(posterior["theta"].values)
    return values.reshape(-1, values.shape[-1])


def plot_field(posteriors: dict, n_cells: int, path: Path, resolution: int = 100) -> dict:
    """Truth, NUTS and RNSHMC posterior-mean log-diffusivity and NUTS's posterior sd.

    The data of ``elliptic_pde()`` come from 20 weights drawn from the prior, so the d = 20
    posterior of ``log c`` is directly comparable with the truth. Returns summary numbers.
    """
    expansion = KarhunenLoeveExpansion(TRUTH["n_modes"])
    true_theta = synthetic_data(TRUTH["n_modes"], TRUTH["prior_sd"], expansion=expansion).true_theta
    axis = np.linspace(0.0, 1.0, resolution)
    second, first = np.meshgrid(axis, axis, indexing="ij")
    basis = expansion.scaled_eigenfunctions(np.column_stack([first.ravel(), second.ravel()]))
    shape = (resolution, resolution)
    truth = (basis @ true_theta).reshape(shape)
    means = {
        name: (basis @ theta_draws(posteriors[name]).mean(axis=0)).reshape(shape)
        for name in ("PyMC NUTS", "RNSHMC")
    }
    covariance = np.cov(theta_draws(posteriors["PyMC NUTS"]), rowvar=False)
    sd = np.sqrt(np.einsum("ij,jk,ik->i", basis, covariance, basis)).reshape(shape)

    limit = float(max(np.abs(truth).max(), *(np.abs(m).max() for m in means.values())))
    figure, axes = plt.subplots(1, 4, figsize=(17, 4.2), constrained_layout=True)
    extent = (0.0, 1.0, 0.0, 1.0)
    panels = [("true log c", truth)] + [
        (f"posterior mean of log c, {name}", field) for name, field in means.items()
    ]
    for ax, (title, field) in zip(axes[:3], panels, strict=True):
        image = ax.imshow(
            field, origin="lower", extent=extent, cmap="RdBu_r", vmin=-limit, vmax=limit
        )
        ax.set_title(title)
    figure.colorbar(image, ax=axes[:3], shrink=0.85, label="log diffusivity")
    points = observation_points()
    axes[0].plot(points[:, 0], points[:, 1], "k.", markersize=2.5)
    image = axes[3].imshow(sd, origin="lower", extent=extent, cmap="viridis", vmin=0.0)
    axes[3].set_title("posterior sd of log c, PyMC NUTS")
    figure.colorbar(image, ax=axes[3], shrink=0.85)
    for ax in axes:
        ax.set_xlabel("$x_1$")
    axes[0].set_ylabel("$x_2$")
    figure.suptitle(
        f"Elliptic PDE inverse problem, d = 20, {n_cells} x {n_cells} mesh; dots: the 121 "
        "observation points",
        fontsize=11,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return {
        "true_theta": true_theta.tolist(),
        "max_abs_true_log_c": float(np.abs(truth).max()),
        "rms_error_of_mean_log_c": {
            name: float(np.sqrt(np.mean((field - truth) ** 2))) for name, field in means.items()
        },
        "mean_posterior_sd_log_c": float(sd.mean()),
        "mean_prior_sd_log_c": float(TRUTH["prior_sd"] * np.sqrt(np.sum(basis**2, axis=1)).mean()),
    }


COLUMNS = [
    ("tune", "tune", "{:d}"),
    ("accept", "accept", "{:.2f}"),
    ("solves / draw", "logps_per_draw", "{:.2f}"),
    ("adjoints / draw", "gradients_per_draw", "{:.2f}"),
    ("s / draw", "seconds_per_draw", "{:.2e}"),
    ("draw / solve", "draw_cost_in_solves", "{:.1f}"),
    ("min bulk ESS", "min_bulk_ess", "{:.0f}"),
    ("min tail ESS", "min_tail_ess", "{:.0f}"),
    ("ESS/s draws", "ess_per_second", "{:.2f}"),
    ("ESS/s whole call", "ess_per_second_whole_call", "{:.2f}"),
    ("x NUTS draws", "speedup_draws", "{:.1f}"),
    ("x NUTS whole call", "speedup_whole_call", "{:.1f}"),
    ("wall s", "wall_seconds", "{:.1f}"),
    ("setup s", "setup_seconds", "{:.1f}"),
    ("max mean diff (MCSE)", "max_mean_difference_mcse", "{:.2f}"),
]


def markdown(reports: list, meta: dict) -> str:
    lines = [
        f"### Elliptic PDE inverse problem, {meta['date']}",
        "",
        f"pymc {meta['pymc']}; {meta['machine']}; one chain, tune {meta['tune']} (ARNSHMC "
        f"{meta['arnshmc_tune']}), draws {meta['draws']}, seed {meta['seed']}. Solve times are "
        "medians over distinct theta (no cached factorization).",
        "",
        "| setting | mesh | s / solve | s / solve+adjoint | sampler | "
        + " | ".join(label for label, _, _ in COLUMNS)
        + " |",
        "|---|---|---|---|---|" + "---|" * len(COLUMNS),
    ]
    for report in reports:
        costs = report["costs"]
        for name, result in report["results"].items():
            cells = [
                report["setting"],
                f"{report['n_cells']} x {report['n_cells']}",
                f"{costs['solve_seconds']:.2e}",
                f"{costs['solve_adjoint_seconds']:.2e}",
                name,
            ]
            cells += [
                fmt.format(result[key]) if result.get(key) is not None else "-"
                for _, key, fmt in COLUMNS
            ]
            lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Settings: " + "; ".join(f"{k}: {v['label']}" for k, v in SETTINGS.items())]
    for report in reports:
        for name, result in report["results"].items():
            if "trajectory" in result:
                extra = ""
                if "grid_points" in result:
                    extra = f", {result['grid_points']} grid points on {result['grid_domain']}"
                elif result.get("surrogate_gradient_error") is not None:
                    extra = (
                        f", weight scale {result.get('surrogate_weight_scale')}, held-out "
                        f"gradient error {result['surrogate_gradient_error']:.2%}"
                    )
                trajectory = result["trajectory"]
                lines.append(
                    f"- {report['setting']}, {report['n_cells']} x {report['n_cells']}, {name}: "
                    f"setup {result['setup_seconds']:.1f} s{extra}; {trajectory['metric']} "
                    f"metric, path length {trajectory['path_length']:.2f}, step size "
                    f"{trajectory['simulated_step_size']:.3f}"
                )
    field = meta.get("field")
    if field:
        errors = ", ".join(f"{k} {v:.3f}" for k, v in field["rms_error_of_mean_log_c"].items())
        lines += [
            "",
            f"Field (d = 20, {field['n_cells']} x {field['n_cells']}, 100 x 100 evaluation grid): "
            f"max |true log c| {field['max_abs_true_log_c']:.2f}; root-mean-square difference of "
            f"the posterior-mean log c from the truth: {errors}; mean posterior sd of log c "
            f"(NUTS) {field['mean_posterior_sd_log_c']:.3f}, mean prior sd "
            f"{field['mean_prior_sd_log_c']:.3f}.",
        ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settings", default=",".join(SETTINGS))
    parser.add_argument("--samplers", default="PyMC NUTS,RNSHMC,ARNSHMC,SparseGridHMC")
    parser.add_argument("--n-cells", type=int, default=30, help="cells per side of the mesh")
    parser.add_argument(
        "--meshes",
        default=None,
        help="comma-separated cells per side, e.g. 30,60 (default --n-cells)",
    )
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--arnshmc-tune", type=int, default=500)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--path-lengths",
        type=lambda text: [float(value) for value in text.split(",")],
        default=[],
        help="also run RNSHMC with each of these fixed path lengths, e.g. 1.6,2.3,2.7,3.2",
    )
    parser.add_argument(
        "--output",
        default="elliptic_pde",
        help="results name under benchmarks/results (the field figure only for the default)",
    )
    args = parser.parse_args()
    meshes = [int(m) for m in args.meshes.split(",")] if args.meshes else [args.n_cells]
    meta = run_metadata(
        tune=args.tune,
        arnshmc_tune=args.arnshmc_tune,
        draws=args.draws,
        seed=args.seed,
        meshes=meshes,
    )
    reports = []
    for n_cells in meshes:
        for setting in args.settings.split(","):
            report, posteriors = run_setting(setting, n_cells, args)
            reports.append(report)
            wanted = {"PyMC NUTS", "RNSHMC"}
            if (
                args.output == "elliptic_pde"
                and setting == "d20"
                and "field" not in meta
                and wanted <= set(posteriors)
            ):
                meta["field"] = plot_field(posteriors, n_cells, FIELD_FIGURE)
                meta["field"]["n_cells"] = n_cells
                print(f"wrote {FIELD_FIGURE}", flush=True)
    text = markdown(reports, meta)
    write_results(args.output, meta | {"reports": reports}, text)
    print(text)


if __name__ == "__main__":
    main()
