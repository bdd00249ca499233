"""RNSHMC on the pharmacokinetic ODE without gradients against posteriordb's reference, per seed.

    python -m benchmarks.pharmacokinetic_reference --seeds 33-38 --safety-net 0.2

For each seed, ``pm.sample(step=RNSHMC(safety_net=...))`` on ``one_compartment_model("LSODA")``
(2 chains, ``cores=1``) and, for the log of each parameter, the mean's distance from the
reference mean in MCSE (the run's bulk-ESS MCSE and the reference's in quadrature), the bulk
ESS, the share of draws with ``log K_m`` beyond 2.64 (2.8 % of the reference draws: the far end
of the ``K_m``-``V_m`` ridge) and the share of surrogate draws. The reference summaries are the
test data's (``tests/data/posteriordb/one_comp_mm_elim_abs-one_comp_mm_elim_abs``).
"""

from __future__ import annotations

import argparse
import json
import os
import warnings
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
import pymc as pm

from pymc_rnshmc import RNSHMC
from pymc_rnshmc.comparison import coordinate_ess
from pymc_rnshmc.workloads import one_compartment_model

REFERENCE = (
    Path(__file__).resolve().parents[1]
    / "tests/data/posteriordb/one_comp_mm_elim_abs-one_comp_mm_elim_abs/log_scale_summary.json"
)
FAR_END = 2.64
"""``log K_m`` beyond which 2.8 % of the reference draws lie."""


def seeds(text: str) -> list[int]:
    """``"33-38"`` or ``"33,35"``."""
    if "-" in text:
        first, last = (int(part) for part in text.split("-"))
        return list(range(first, last + 1))
    return [int(part) for part in text.split(",")]


def report(idata, reference: dict) -> str:
    cells = []
    for index, name in enumerate(reference["names"]):
        draws = np.log(np.asarray(idata.posterior[name].values))
        ess = float(coordinate_ess(draws[..., None], "bulk")[0])
        mcse = np.hypot(draws.std(ddof=1) / np.sqrt(ess), reference["mcse_mean"][index])
        z = (draws.mean() - reference["mean"][index]) / mcse
        cells.append(f"log {name} {z:+.1f} (ESS {ess:.0f})")
    far = float(np.mean(np.log(idata.posterior["K_m"].values) > FAR_END))
    used = float(np.mean(idata.sample_stats["used_surrogate"].values))
    return " | ".join(cells) + f" | far end {far:.3f} | surrogate draws {used:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=seeds, default=seeds("33-38"))
    parser.add_argument("--safety-net", type=float, default=None)
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=1000)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    reference = json.loads(REFERENCE.read_text())
    for seed in args.seeds:
        with one_compartment_model("LSODA"):
            idata = pm.sample(
                step=RNSHMC(safety_net=args.safety_net),
                tune=args.tune,
                draws=args.draws,
                chains=2,
                cores=1,
                random_seed=seed,
                progressbar=False,
                compute_convergence_checks=False,
            )
        print(f"seed {seed}: {report(idata, reference)}", flush=True)


if __name__ == "__main__":
    main()
