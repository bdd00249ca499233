"""RNSHMC's defaults on everyday PyMC models nobody tuned on agree with long NUTS references.

The models are those of ``benchmarks/user_models.py`` (an LKJ covariance, a zero-inflated
regression, a Gaussian random walk, censored and truncated likelihoods, ``pm.Data`` and a
``Deterministic``, a mixture with ordered means and Dirichlet weights, a multilevel regression, a
latent GP, a ``Potential``, an integer variable that PyMC gives to ``Metropolis``, and a GP's
hyperparameters by their marginal likelihood). The
references are their posterior means and MCSEs from nutpie, 4 x (1000 + 5000) draws (PyMC's NUTS
beside Metropolis for the integer variable), stored by ``python -m benchmarks.user_models
--write-references tests/step_methods/data/user_models_reference.json``. Every coordinate's mean
must lie within ``WRONG`` MCSEs (both added in quadrature), the bar of the trust battery.
Slow: ``scripts/run-tests -m slow``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks.user_models import MODELS, WRONG, moments, sample_model

REFERENCES = Path(__file__).resolve().parent / "data" / "user_models_reference.json"


@pytest.fixture(scope="module")
def references() -> dict:
    return json.loads(REFERENCES.read_text())


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MODELS))
def test_rnshmc_agrees_with_the_reference(name, references):
    model = MODELS[name]()
    idata = sample_model(model, "RNSHMC", seed=1, tune=1000, draws=1000, chains=2)
    found, reference = moments(model, idata), references[name]
    for variable, ours in found.items():
        theirs = {key: np.asarray(value) for key, value in reference[variable].items()}
        z = (ours["mean"] - theirs["mean"]) / np.hypot(ours["mcse"], theirs["mcse"])
        assert np.all(np.abs(z) < WRONG), f"{name}: {variable} is {np.max(np.abs(z)):.1f} MCSE off"
