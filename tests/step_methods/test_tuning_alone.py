"""The stretch of tuning on the surrogate alone: which draws move alone, and what ends it."""

from __future__ import annotations

import logging

from pymc_rnshmc.step_methods.tuning_alone import (
    ALONE_CHECK_EVERY,
    ALONE_DRIFT_NATS,
    FINAL_EXACT_DRAWS,
    AloneTuning,
)

TUNE = 1000


def test_the_stretch_is_open_until_the_last_exact_draws_and_only_when_tune_is_known():
    alone = AloneTuning(enabled=True)
    assert alone.open_at(TUNE - FINAL_EXACT_DRAWS - 1, TUNE)
    assert not alone.open_at(TUNE - FINAL_EXACT_DRAWS, TUNE)
    assert not alone.open_at(10, tune=None)  # PyMC 5 does not tell a step its tuning length
    assert not AloneTuning(enabled=False).open_at(10, TUNE)


def test_every_tenth_draw_of_the_stretch_keeps_the_exact_test():
    moves = [AloneTuning.moves_alone(i) for i in range(200, 200 + 2 * ALONE_CHECK_EVERY)]
    assert moves.count(False) == 2 and not moves[0] and not moves[ALONE_CHECK_EVERY]


def test_a_drift_of_the_surrogates_error_ends_the_stretch_for_good(caplog):
    alone = AloneTuning(enabled=True, name="RNSHMC")
    alone.check(logp=float("nan"), surrogate_potential=1.0)  # no evidence
    assert alone.reference is None
    alone.check(logp=-3.0, surrogate_potential=10.0)  # error U - U~ = -7: the reference
    alone.check(logp=-5.0, surrogate_potential=2.0 + ALONE_DRIFT_NATS)  # drifted less
    assert alone.reference == -7.0 and alone.open_at(100, TUNE)
    with caplog.at_level(logging.DEBUG, logger="pymc.rnshmc"):
        alone.check(logp=-5.0, surrogate_potential=-2.0 - ALONE_DRIFT_NATS)  # beyond it
    assert alone.ended and not alone.open_at(100, TUNE)
    assert "drifted by" in caplog.text
    alone.new_surrogate()
    assert alone.reference is None and alone.ended
