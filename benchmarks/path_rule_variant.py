"""Run a benchmark with another rule for the surrogate's path length (a study, not a default).

    python -m benchmarks.path_rule_variant min benchmarks.wide_models --dims 80 --seeds 1,2 \\
        --samplers RNSHMC --output wide_models_path_min
    python -m benchmarks.path_rule_variant share:0.8 benchmarks.trust_battery \\
        --posteriors banana --dynamics hmc --output trust_path_share08

The first argument replaces :meth:`pymc_rnshmc.hmc.trajectory_tuning.TrajectoryChoice.of` in
this process: ``min`` takes the candidate with the most of the smaller of its ESS of means and
of squares per unit cost; ``share:<s>`` the most ESS of means per unit cost among the candidates
whose ESS of squares is at least ``s`` times the best (the package's rule is ``share:0.5``). The
rest of the command line is the benchmark module and its arguments; it must run its samplers in
this process (``wide_models`` and ``trust_battery`` do, ``economy`` does not). See
``docs/benchmarks.md``, "Path lengths for the tails".
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import runpy
import sys

from pymc_rnshmc.hmc.trajectory_tuning import TrajectoryCandidate, TrajectoryChoice


def smaller_ess(candidate: TrajectoryCandidate) -> float:
    """The smaller of the candidate's two ESS per draw, per unit cost."""
    worst = min(candidate.ess_mean, candidate.ess_square)
    return max(worst, 0.0) / candidate.cost_per_draw


def rule(name: str):
    """``TrajectoryChoice.of`` for the rule ``name``."""

    def of(cls, candidates: list[TrajectoryCandidate]) -> TrajectoryChoice:
        if name == "min":
            return cls(max(candidates, key=smaller_ess), candidates)
        share = float(name.split(":", 1)[1])
        best_square = max(c.ess_square for c in candidates)
        eligible = [c for c in candidates if c.ess_square >= share * best_square]
        return cls(max(eligible, key=lambda c: c.mean_efficiency), candidates)

    return classmethod(of)


def main() -> None:
    name, module, *arguments = sys.argv[1:]
    TrajectoryChoice.of = rule(name)
    sys.argv = [module, *arguments]
    runpy.run_module(module, run_name="__main__")


if __name__ == "__main__":
    main()
