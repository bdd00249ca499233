"""The learning plan's rules, on record sizes and draw counts alone."""

from __future__ import annotations

import numpy as np

from pymc_rnshmc.step_methods.economy import Economy
from pymc_rnshmc.step_methods.learning_plan import WALL_REFIT_GROWTH, WALL_REFITS, LearningPlan
from pymc_rnshmc.step_methods.schedule import RNSHMC_SCHEDULE

ADAPTATION = RNSHMC_SCHEDULE.refit_adaptation


def plan(learns: bool = True, weighs: bool = False) -> LearningPlan:
    return LearningPlan(RNSHMC_SCHEDULE, learns, Economy(weighs=weighs), "test")


def test_a_first_fit_plans_a_refit_at_the_schedules_growth_unless_it_cannot_learn():
    learning = plan()
    learning.after_fit(100, error=0.2, tuning_draws_left=800, end_of_tuning=False)
    assert learning.next_refit == RNSHMC_SCHEDULE.next_refit(100) == 200
    assert learning.fit_error == 0.2
    # a first refit may come on half again as many points; one on fewer would leave too few
    # draws after it
    too_few = 50 + ADAPTATION - 1
    for tuning_draws_left, end_of_tuning in ((800, True), (too_few, False)):
        stopped = plan()
        stopped.after_fit(100, 0.2, tuning_draws_left, end_of_tuning)
        assert not stopped.learning
    not_learning = plan(learns=False)
    not_learning.after_fit(100, 0.2, tuning_draws_left=800, end_of_tuning=False)
    assert not not_learning.learning


def test_a_refit_that_learned_little_ends_the_plan():
    learning = plan()
    learning.after_fit(100, error=0.05, tuning_draws_left=800, end_of_tuning=False)
    learning.after_fit(200, error=0.049, tuning_draws_left=700, end_of_tuning=False)
    assert not learning.learning  # below the learned error, and not better by the share asked


def test_a_refit_is_due_at_its_record_size_and_dropped_once_it_cannot_come_in_time():
    learning = plan()
    learning.after_fit(100, error=0.2, tuning_draws_left=800, end_of_tuning=False)
    assert not learning.refit_due(199, 500, 1500, chains=1)
    assert learning.refit_due(200, 500, 1500, chains=1)
    assert learning.refit_due(250, None, 1500, chains=1)  # PyMC 5: the tuning length unknown
    # a point a draw: the 50 points of the least first refit to come, then the adaptation
    last_in_time = 50 + ADAPTATION
    assert not learning.refit_due(100, last_in_time, 1500, chains=1) and learning.learning
    assert not learning.refit_due(100, last_in_time - 1, 1500, chains=1)
    assert not learning.learning


def test_pooled_chains_grow_the_record_by_a_point_a_chain_and_refit_in_time():
    # 4 chains, tune = 300: a first fit on 240 points with 150 tuning draws left
    alone, pooled = plan(), plan()
    alone.after_fit(240, error=0.2, tuning_draws_left=150, end_of_tuning=False)
    pooled.after_fit(240, error=0.2, tuning_draws_left=150, end_of_tuning=False, chains=4)
    # the least first refit (360 points) is 120 points away: at one a draw too late to leave
    # the adaptation's 100 draws, at four a draw 30 draws away
    assert not alone.learning
    assert pooled.learning and (pooled.least_refit, pooled.next_refit) == (360, 480)
    assert not pooled.refit_due(300, 140, 1140, chains=4)  # not due yet, and still in time
    assert pooled.learning
    assert pooled.refit_due(440, ADAPTATION, 1100, chains=4)  # the last draw in time
    for draws_before_adaptation, in_time in ((15, True), (14, False)):  # 60 points to come
        late = plan()
        late.after_fit(240, error=0.2, tuning_draws_left=150, end_of_tuning=False, chains=4)
        late.refit_due(300, ADAPTATION + draws_before_adaptation, 1115, chains=4)
        assert late.learning is in_time


def test_a_first_refit_that_cannot_double_in_time_comes_at_the_last_draw_with_half_again():
    # d = 320 with tune = 1000: 480 exploration draws, 520 tuning draws left
    learning = plan()
    learning.after_fit(480, error=0.06, tuning_draws_left=520, end_of_tuning=False)
    assert learning.learning and learning.next_refit == 960 and learning.least_refit == 720
    assert not learning.refit_due(850, ADAPTATION + 1, 1500, chains=1)  # not yet the last draw
    assert learning.refit_due(850, ADAPTATION, 1500, chains=1)  # the last: 850 >= 720 points
    short = plan()
    short.after_fit(480, error=0.06, tuning_draws_left=520, end_of_tuning=False)
    assert not short.refit_due(700, ADAPTATION, 1500, chains=1)  # grown too little by then
    assert not short.learning
    # after that refit nothing can follow; a later refit has no such allowance
    learning.after_fit(850, error=0.03, tuning_draws_left=ADAPTATION, end_of_tuning=False)
    assert not learning.learning
    later = plan()
    later.after_fit(100, error=0.2, tuning_draws_left=800, end_of_tuning=False)
    later.after_fit(200, error=0.15, tuning_draws_left=700, end_of_tuning=False)
    assert later.least_refit == later.next_refit == 400


def test_a_second_refit_is_dropped_where_it_costs_more_than_it_saves():
    learning = plan(weighs=True)
    economy = learning.economy
    economy.fit_took(600, 2.0, refit=False)
    economy.fit_took(600, 2.0, refit=True)
    for _ in range(50):
        economy.note_draw(0, 15, 5e-3)
        economy.note_draw(1, 0, 4e-3)
    learning.next_refit = learning.least_refit = 600
    assert not learning.refit_due(600, 200, 1200, chains=1)  # 2 s against 1.2 ms a draw saved
    assert not learning.learning
    learning.next_refit = learning.least_refit = 600
    assert learning.refit_due(600, 200, 1200, chains=100)  # a hundred chains share the fit
    learning.for_wall = True
    assert learning.refit_due(600, 200, 1200, chains=1)  # a wall's refit is not weighed


def test_walls_bring_a_refit_at_once_a_few_times_and_only_after_the_record_grew():
    learning = plan()
    fitted = 100
    learning.refit_behind_wall(fitted, fitted)  # nothing new to fit since the last fit
    assert not learning.learning and not learning.for_wall
    grown = int(np.ceil(WALL_REFIT_GROWTH * fitted))
    refits = 0
    for _ in range(5):
        learning.stop()
        learning.refit_behind_wall(grown, fitted)
        if learning.learning:
            assert learning.next_refit == grown and learning.for_wall
            learning.after_fit(grown, 0.2, tuning_draws_left=800, end_of_tuning=False)
            assert not learning.for_wall  # the refit met it
            refits += 1
    assert refits == WALL_REFITS and learning.wall_refits_spent
    learning.restart()  # a new surrogate after a collapse gets its own refits for walls
    assert not learning.wall_refits_spent
    learning.refit_behind_wall(grown, fitted)
    assert not learning.refit_due(grown, ADAPTATION - 1, 1500, chains=1)  # too late for it
    assert not learning.learning and not learning.for_wall  # so nothing waits for it
    never = plan(learns=False)
    never.refit_behind_wall(grown, fitted)
    assert not never.learning and never.wall_refits_spent


def test_fits_are_counted_and_the_fit_after_a_restart_is_a_first_again():
    learning = plan()
    learning.after_fit(100, error=0.05, tuning_draws_left=800, end_of_tuning=False)
    learning.after_fit(200, error=0.049, tuning_draws_left=700, end_of_tuning=False)
    assert not learning.learning  # learned and stagnating
    learning.restart()  # the surrogate collapsed; the chain explores again
    learning.after_fit(300, error=0.049, tuning_draws_left=450, end_of_tuning=False)
    # a first fit is always refitted, with half again as many points if it cannot double
    assert learning.learning and (learning.least_refit, learning.next_refit) == (450, 600)
    unknown = plan()  # a surrogate that reports no held-out error
    unknown.after_fit(100, error=np.nan, tuning_draws_left=800, end_of_tuning=False)
    unknown.after_fit(200, error=np.nan, tuning_draws_left=700, end_of_tuning=False)
    assert unknown.least_refit == unknown.next_refit == 400  # only the first has the allowance


def test_a_kept_poor_fit_is_refitted_at_the_next_draw_if_a_refit_is_planned():
    learning = plan()
    learning.after_fit(200, error=0.3, tuning_draws_left=700, end_of_tuning=False)
    assert not learning.refit_due(300, 600, 1600, chains=1)  # a doubling away
    learning.refit_now(300)
    assert learning.refit_due(300, 600, 1600, chains=1)
    ended = plan()
    ended.after_fit(200, error=0.3, tuning_draws_left=700, end_of_tuning=True)
    ended.refit_now(300)
    assert not ended.learning  # no plan to bring forward
