"""Is RNSHMC's frozen kernel exact at the banana's arm tips, and how often does it go there?

    python -m benchmarks.arm_tips                       # seeds 1-4, about 2 minutes a seed
    python -m benchmarks.arm_tips --seeds 1 --bulk 20000 --output arm_tips_smoke

The banana of the trust battery (``b ~ N(0, I_2)``, 100 observations ``y ~ N(b1 + b2^2, 2)``,
data seed 1) holds 0.12 % of its mass at the arm tips, ``T: |b2| > 1.8``, where the arms are
narrow and far from the exploration's draws; ``B: 1.5 < |b2| <= 1.8`` is the band next to them,
the rest is the bulk. Per seed, ``RNSHMC(dynamics="hmc")`` is tuned by ``pm.sample`` (one chain,
1000 tuning draws) and frozen. Exact draws of the posterior (``tests/stationarity.py``: 3 million,
of which those in ``T``, ``--band`` of those in ``B`` and ``--bulk`` of the others) each make one
transition of the frozen step. The kernel is reversible (a Metropolis test after a reversible
move, or a NUTS transition, mixed by a coin that ignores the state), so the flow of probability
from ``T`` to any set equals the flow back: ``pi(T) P(T -> B) = pi(B) P(B -> T)`` and likewise
for the bulk. The rows give both sides with the ``z`` of their difference (binomial standard
errors, the way back's as a balanced kernel would have it), the total flow in and out of ``T``
per draw (in draws of 10 000, the number of visits to ``T`` to expect), and the acceptance of
one transition from 200 tip draws with the step size scaled by ``--step-scales``, with the
median ``surrogate_error`` there (the model's change of potential over the move minus the
surrogate's, in nats): where acceptance does not rise as the step shrinks, the surrogate, not
the integrator, keeps the chain out.

Results go to ``benchmarks/results/<output>.{json,md}``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse

import numpy as np

from benchmarks.measure import markdown_table, run_metadata, write_results
from pymc_rnshmc import RNSHMC
from pymc_rnshmc.hmc.kernel import kernel_step
from pymc_rnshmc.hmc.transition import CachedPoint
from pymc_rnshmc.workloads import banana_data
from tests.stationarity import BananaPosterior, push, tuned_step

TIP, BAND = 1.8, 1.5
"""``|b2|`` beyond which a draw is at an arm tip, and where the band next to the tips starts."""
EXACT_DRAWS = 3_000_000


def region(draws: np.ndarray) -> np.ndarray:
    """0 in the bulk, 1 in the band, 2 at the tips."""
    size = np.abs(draws[:, 1])
    return (size > BAND).astype(int) + (size > TIP).astype(int)


def one_transition(step, model, starts: np.ndarray) -> np.ndarray:
    """The region each start is in after one transition of the frozen step."""
    return region(push(step, model, starts, (1,)).draws[1])


def flow(mass_from: float, moved: np.ndarray, mass_to: float, back: np.ndarray) -> dict:
    """Both sides of ``pi(A) P(A -> C) = pi(C) P(C -> A)`` and the ``z`` of their difference.

    The variance of the way back is that of a balanced kernel (its probability ``out / pi(C)``),
    not of the count seen: a rare way back often shows no event at all, whose own variance is
    zero.
    """
    out, into = mass_from * moved.mean(), mass_to * back.mean()
    balanced = min(out / mass_to, 1.0)
    variance = (
        mass_from**2 * moved.var() / moved.size
        + mass_to**2 * balanced * (1.0 - balanced) / back.size
    )
    return {"out": out, "back": into, "z": (out - into) / np.sqrt(variance) if variance else 0.0}


def step_size_rows(step, starts: np.ndarray, scales, rng) -> list[dict]:
    """Acceptance of one transition from each of ``starts`` with the step size scaled."""
    exact = step._chain.exact_model
    rows = []
    for scale in scales:
        kernel = step.kernel._replace(step_size=step.kernel.step_size * scale)
        results = []
        for start in starts.astype(step.dtype):
            point = CachedPoint(start, exact.logp(start), ())
            results.append(kernel_step(kernel, point, rng, exact))
        rows.append(
            {
                "step size scale": scale,
                "acceptance": float(np.mean([r.accept for r in results])),
                "median surrogate error": float(np.nanmedian([r.surrogate_error for r in results])),
            }
        )
    return rows


def run(seed: int, band: int, bulk: int, scales) -> dict:
    """Tune and freeze the step for ``seed``, then the flows and the step-size rows."""
    posterior = BananaPosterior(data=banana_data(100, 1))
    model = posterior.model()
    tuning, _, drawing = np.random.SeedSequence(seed).spawn(3)  # as tests.stationarity's streams
    sampling_seed, draw_rng = int(tuning.generate_state(1)[0]), np.random.default_rng(drawing)
    step = tuned_step(lambda: RNSHMC(dynamics="hmc"), model, 1000, sampling_seed)
    draws = posterior.sample(EXACT_DRAWS, draw_rng)
    where = region(draws)
    mass = [float(np.mean(where == k)) for k in range(3)]
    starts = [draws[where == 0][:bulk], draws[where == 1][:band], draws[where == 2]]
    after = [one_transition(step, model, s) for s in starts]
    with_band = flow(mass[2], after[2] == 1, mass[1], after[1] == 2)
    with_bulk = flow(mass[2], after[2] == 0, mass[0], after[0] == 2)
    into = with_band["back"] + with_bulk["back"]
    return {
        "seed": seed,
        "phase": str(getattr(step.phase, "value", step.phase)),
        "step size": float(step.kernel.step_size),
        "path length": float(step.kernel.proposal.path_length),
        "tip draws": int(starts[2].shape[0]),
        "tips -> band": with_band["out"],
        "band -> tips": with_band["back"],
        "z band": with_band["z"],
        "tips -> bulk": with_bulk["out"],
        "bulk -> tips": with_bulk["back"],
        "z bulk": with_bulk["z"],
        "bulk draws that reached the tips": int(np.sum(after[0] == 2)),
        "out of tips / into tips": (with_band["out"] + with_bulk["out"]) / into,
        "visits to the tips per 10 000 draws": 1e4 * into,
        "stay at the tips": float(np.mean(after[2] == 2)),
        "step sizes": step_size_rows(step, starts[2][:200], scales, np.random.default_rng(seed)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1,2,3,4")
    parser.add_argument("--band", type=int, default=4000)
    parser.add_argument("--bulk", type=int, default=150_000)
    parser.add_argument("--step-scales", default="1,0.5,0.25,0.1")
    parser.add_argument("--output", default="arm_tips")
    args = parser.parse_args()
    scales = [float(s) for s in args.step_scales.split(",")]
    rows = []
    for seed in (int(s) for s in args.seeds.split(",")):
        rows.append(run(seed, args.band, args.bulk, scales))
        columns = [c for c in rows[0] if c != "step sizes"]
        lines = markdown_table(rows, columns)
        for row in rows:
            lines += ["", f"Seed {row['seed']}, one transition from 200 tip draws:", ""]
            lines += markdown_table(row["step sizes"], list(row["step sizes"][0]))
        metadata = run_metadata(**vars(args))
        write_results(args.output, {"metadata": metadata, "runs": rows}, "\n".join(lines))
        print("\n".join(lines), flush=True)


if __name__ == "__main__":
    main()
