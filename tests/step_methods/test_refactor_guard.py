"""Refactor guard: each sampler's draws on fixed seeds, recorded once per PyMC generation.

While the step layer is rebuilt, every move must leave these draws unchanged (tuning draws and
stats included): counts and decisions identical, floating-point values to ``RTOL``. A change
that is meant to alter them re-records them in its own commit, saying why:
``python -m tests.step_methods.test_refactor_guard``, on each PyMC generation and kernel family
(:data:`SAME_KERNELS`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pymc as pm
import pytest

from pymc_rnshmc import ARNSHMC, RNSHMC, RNSRMHMC, SparseGridHMC
from tests.models import correlated_normal

PYMC_GENERATION = int(pm.__version__.split(".")[0])
GUARDED = {
    "RNSHMC": (RNSHMC, {"exploration_steps": 100}, True),
    "ARNSHMC": (ARNSHMC, {"exploration_steps": 50}, True),
    "SparseGridHMC": (SparseGridHMC, {"exploration_steps": 60}, True),
    "RNSHMC nuts": (RNSHMC, {"exploration_steps": 100, "dynamics": "nuts"}, True),
    "RNSRMHMC": (RNSRMHMC, {"exploration_steps": 100}, True),
    "RNSHMC without gradients": (RNSHMC, {"exploration_steps": 100}, False),
    "SparseGridHMC without gradients": (SparseGridHMC, {"exploration_steps": 60}, False),
}
"""Sampler, options, and whether the model has gradients: every sampler and dynamics. Costs are
not weighed (``weigh_costs=False``): choices from timings would make the draws depend on more
than the seed."""
RTOL, ATOL = 1e-6, 1e-9
"""Floating-point tolerance. New releases of numpy, scipy and the BLAS round differently: fresh
environments on 2026-11-25 (numpy 2.4.6 / 2.5.5) moved the recorded draws by up to 1.6e-7
relative, with every accept decision and step count the same. A change of behaviour moves
whole draws."""
SAME_KERNELS = {"Zen": "Haswell"}
"""OpenBLAS picks its kernels for the CPU, and kernels for other instruction sets round
differently: on a machine with AVX-512 ("SkylakeX" kernels) SparseGridHMC's draws moved by 4e-5
relative against the record made with AVX2 kernels, and without gradients diverged whole
(2026-11-28). So there is one record per PyMC generation and kernel family ("Zen" runs
Haswell's kernels: the same draws, checked with ``OPENBLAS_CORETYPE``); on another family the
guard is skipped until it is recorded there. Forcing one family's kernels everywhere is no way
out: ``OPENBLAS_CORETYPE=Haswell`` on the AVX-512 machine crashed scipy's ``eigh``. A sampler
missing from a record is skipped: the Haswell records lost SparseGridHMC when the whitened
metric's ``velocity`` began to multiply by ``M^-1`` formed once (2026-11-28), which moved its
draws by 2e-5 relative on the AVX-512 machine, where it was re-recorded; they held only RNSRMHMC
once the surrogate dynamics' quarter period was estimated from held-out draws (2026-11-28), which
changed every other sampler's path lengths, until they were re-recorded for every sampler on an
AMD EPYC running Haswell's kernels (2026-11-29; RNSRMHMC's draws matched the old record to
1e-10)."""
STATS = ("accept", "n_steps", "step_size", "model_logp", "n_logp_evals", "n_gradient_evals")


def guarded_draws(name: str) -> dict[str, np.ndarray]:
    """Tuning and kept draws of two chains (150 + 50) with their main stats."""
    step_class, options, gradient = GUARDED[name]
    with correlated_normal(gradient=gradient):
        idata = pm.sample(
            step=step_class(weigh_costs=False, **options),
            tune=150,
            draws=50,
            chains=2,
            cores=1,
            random_seed=2026,
            progressbar=False,
            compute_convergence_checks=False,
            discard_tuned_samples=False,
        )
    record = {}
    for group, prefix in (("warmup_", "tune_"), ("", "")):
        posterior = getattr(idata, f"{group}posterior")
        stats = getattr(idata, f"{group}sample_stats")
        record[f"{name}/{prefix}x"] = np.asarray(posterior["x"].values)
        for stat in STATS:
            record[f"{name}/{prefix}{stat}"] = np.asarray(
                stats["lp" if stat == "model_logp" else stat].values
            )
    return record


def kernel_family() -> str:
    """The kernel family of the OpenBLAS libraries numpy and scipy loaded (``"mixed"`` if they
    differ)."""
    import scipy.linalg  # noqa: F401  (loads scipy's own OpenBLAS)
    from threadpoolctl import threadpool_info

    found = {info["architecture"] for info in threadpool_info() if "architecture" in info}
    families = {SAME_KERNELS.get(name, name) for name in found}
    return families.pop() if len(families) == 1 else "mixed"


RECORD = (
    Path(__file__).parent / "data" / f"refactor_guard_pymc{PYMC_GENERATION}_{kernel_family()}.npz"
)


@pytest.mark.skipif(
    not RECORD.exists(),
    reason=f"no record for PyMC {PYMC_GENERATION} with OpenBLAS's {kernel_family()} kernels",
)
@pytest.mark.parametrize("name", list(GUARDED))
def test_draws_are_those_of_the_record(name):
    recorded = np.load(RECORD)
    if f"{name}/x" not in recorded:
        pytest.skip(f"no record of {name} for this PyMC generation and kernel family")
    for key, values in guarded_draws(name).items():
        expected = recorded[key]
        if np.issubdtype(expected.dtype, np.floating):
            np.testing.assert_allclose(values, expected, rtol=RTOL, atol=ATOL, err_msg=key)
        else:
            np.testing.assert_array_equal(values, expected, err_msg=key)


if __name__ == "__main__":
    RECORD.parent.mkdir(exist_ok=True)
    everything = {}
    for sampler_name in GUARDED:
        everything.update(guarded_draws(sampler_name))
    np.savez(RECORD, **everything)
    print(f"recorded {len(everything)} arrays in {RECORD}")
