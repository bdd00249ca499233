"""Whether the surrogate pays for itself: a chain's measured costs, and the choices they settle.

A surrogate sampler is for models whose ``logp`` is expensive, but the user's clock is the whole
call, and on a cheap model a fit, a compilation or a surrogate draw can cost more than the exact
draws it saves. While tuning, a chain measures what its draws cost (:class:`DrawCosts`: seconds
of each exact and surrogate draw, outside the fits), and six choices follow from the numbers,
each a plain function here (or a method of :class:`Economy`):

- :func:`logp_function_pays`: whether the end points of surrogate draws are evaluated by the
  logp-only function (no gradient, but compiled at its first call: about a second per process
  under PyTensor's Numba backend) or by the joint logp-and-gradient function the exploration
  has already compiled;
- :meth:`Economy.fit_limit`: how long a chain's first fit may take before it is abandoned for
  exact NUTS (as long as exact NUTS would need to finish the chain);
- :meth:`Economy.setup_budget`: how long a chain's fits may spend choosing their trajectories
  (metrics and path lengths), a share of what exact NUTS would still need; none beyond the
  first metric for a poor fit awaiting the verdict (:meth:`Economy.skips_setup`);
- :func:`refit_pays`: whether a second or later refit (seconds, growing with the record) costs
  less than a share of what the surrogate's draws still save against exact NUTS draws;
- :func:`sampling_verdict`: after the first fit's surrogate has run ``VERDICT_DRAWS`` tuning
  draws, whether it gives more effective draws per second than the exact NUTS draws of the
  exploration, and whether its fit is too poor to trust that estimate where its draws are not
  much cheaper; if not, the chain continues with exact NUTS and says why in one line;
- :func:`unchecked_fit_too_poor`: whether a first fit made as tuning ends, which no verdict
  follows, is too poor to draw with (then the kept draws are exact NUTS's).

:class:`Economy` is what a warm-up holds of all this: the costs, its fits' sizes and seconds,
and the verdict once given. numpy only. The thresholds are named here and were measured with
``benchmarks/economy.py`` (``docs/benchmarks.md``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pymc_rnshmc.hmc.trajectory_tuning import effective_sample_size_per_draw

__all__ = [
    "DrawCosts",
    "Economy",
    "Verdict",
    "effective_draws_per_draw",
    "logp_function_pays",
    "refit_pays",
    "sampling_verdict",
    "unchecked_fit_too_poor",
]

GRADIENT_SHARE = 0.5
"""The logp-only function is assumed to save at most this share of a joint evaluation's cost.
Reverse-mode gradients cost a small multiple of the value (PDE adjoints: about one more solve),
so the value alone costs at least about half of the pair."""
REFIT_SHARE = 0.5
"""A refit after the first may cost at most this share of what the surrogate's draws still save
against exact NUTS draws ..."""
FIT_COST_EXPONENT = 1.0
"""... predicted as the last fit's seconds times (record growth) to this power. Only refits
after the first are weighed, and by then the network's width has stopped growing: fits on the
elliptic PDE (30 x 30) took 0.51 s on 150 points, 2.7 s on 300 and 5.0 s on 600. An exponent of
2, fitted to the first two, predicted the third at 11 s and dropped refits that paid on the
60 x 60 mesh (min ESS 401-454 against 546 with them, 4 seeds)."""
SETUP_SHARE = 0.5
"""A fit's choice of trajectories stops comparing metrics and scanning path lengths once the
chain's fits together have taken this share of what exact NUTS would need for the draws still
to come (its measured seconds per draw times the draws left, all chains'), and takes the best
candidate scored by then (the first metric is always scored). On cheap models the scan alone
cost several times NUTS's whole call (posteriordb ``sblrc-blr``: setup 2.2-9.5 s against a
1.8 s NUTS call, 4 seeds); with a budget per fit and every metric scored regardless, a chain's
fits still took 0.4-1.6 s in all (4.4 s once) against NUTS calls of 0.8-2.4 s (Student-t,
log-gamma, non-centred eight schools, 4 seeds each; ``docs/benchmarks.md``). On costly models
the budget is never reached (but a poor fit awaiting the verdict gets none:
:meth:`Economy.skips_setup`)."""
FIT_LIMIT_SHARE = 1.0
"""A chain's first fit is abandoned once it has taken this share of the seconds exact NUTS would
need to finish the chain (its measured seconds per draw times the draws left, all chains'):
then the fit alone has cost as much as not fitting at all, and its surrogate would have to make
every later draw more than twice as efficient per second as NUTS's to win. On a non-centred
multilevel regression with 1507 parameters (a gradient of 45 microseconds, ``tune=4000``) the
fit took 10.7 s where exact NUTS needed about 2.9 s for the 2739 draws left, and the surrogate,
given up a hundred draws later, left the call at 4.1 times PyMC NUTS's (stopped at the limit:
1.8 times). On 22 other posteriors (the economy's, 2 seeds) first fits took 0.0003-0.15 of the
limit, and no share below 1 separated those where the surrogate lost from those where it won
(``docs/benchmarks.md``)."""
VERDICT_DRAWS = 100
"""Surrogate tuning draws after the first fit before the verdict on whether it pays."""
VERDICT_MARGIN = 1.5
"""The surrogate is given up only if its seconds per effective draw exceed exact NUTS's by this
factor: both are estimated from about a hundred draws ..."""
VERDICT_MIN_ESS = 25.0
"""... and only if exact NUTS's estimate rests on at least this many effective draws. A short
window of a slowly mixing chain overstates its ESS, and an overstated NUTS would take the
surrogate's place wrongly: on the banana (d = 2) the exploration's last 100 NUTS draws gave
0.15 per draw where NUTS's 1000 kept draws give 0.02. The surrogate's own estimate needs no such
floor: a low one is evidence that it mixes poorly (on non-centred eight schools a floor on both
kept surrogates with 0.1 effective draws a draw, at 0.03 times NUTS's ESS per second)."""
VERDICT_FIT_ERROR = 0.15
"""A surrogate whose held-out gradient error is above this is given up at the verdict, whatever
the windows' ESS says ...
"""
VERDICT_COST_RATIO = 2.0
"""... unless an exact NUTS draw costs at least this many times one of its draws. Windows of a
hundred draws can overstate how well a poor surrogate mixes where it misses part of the
posterior (a funnel's neck, a heavy tail), and with draws no cheaper than NUTS's it has nothing
else to win by. Measured by forcing each answer on the same chains (``benchmarks/economy.py``,
"RNSHMC keep" and "RNSHMC give up", 4 seeds; ``docs/benchmarks.md``). Giving up was the better
answer in all 4 runs of non-centred eight schools: held-out errors 0.22-0.30, surrogate draws
1.0-2.1 times an exact draw's seconds, ESS per second of the call 0.02-0.56 times NUTS's when
kept against 0.66-1.04 when given up. It was also better in all 4 runs of the Student-t (errors
0.16-0.31). The elliptic PDE's fits (errors 0.11-0.13, surrogate draws 3-4 times cheaper) paid
in 3 of 4 runs.

Where exact NUTS would continue with a metric from the chain's correlated draws
(:attr:`Verdict.new_metric`), a poor fit is given up whatever its draws cost: the exploration's
ESS then measured a diagonal metric that exact NUTS no longer has. On the non-centred
hierarchical logistic regression with 50 groups (errors 0.21-0.35), the surrogate's draws were
7-10 times cheaper and were kept, at 0.04-0.14 times the ESS per second of PyMC's dense NUTS;
given up, 1.06-1.26 (``economy_verdict_new_metric3``)."""


@dataclass
class DrawCosts:
    """Seconds of a chain's tuning draws, outside the fits, by kind.

    A population's chains share one (their warm-up's); each draw is charged its own work,
    wherever it ran (an evaluator's measured seconds), or else its share of the round's
    batches.
    """

    exact: list[float] = field(default_factory=list)
    """Seconds of each exact NUTS draw of the exploration (the first includes compiling)."""
    exact_gradients: list[int] = field(default_factory=list)
    """Gradient evaluations of each of those draws."""
    surrogate: list[float] = field(default_factory=list)
    """Seconds of each draw since the last fit (surrogate draws and safety-net draws)."""

    def note_exact(self, seconds: float, gradients: int) -> None:
        self.exact.append(float(seconds))
        self.exact_gradients.append(int(gradients))

    def note_surrogate(self, seconds: float) -> None:
        self.surrogate.append(float(seconds))

    def fitted(self) -> None:
        """A new surrogate: its draws are measured afresh."""
        self.surrogate = []

    def exact_draw_seconds(self) -> float:
        """Mean seconds of the last half of the exploration's draws (NaN before two)."""
        if len(self.exact) < 2:
            return np.nan
        return float(np.mean(self.exact[len(self.exact) // 2 :]))

    def seconds_per_gradient(self) -> float:
        """Seconds per gradient evaluation of the exploration, its first draw left out."""
        seconds, gradients = np.sum(self.exact[1:]), np.sum(self.exact_gradients[1:])
        return float(seconds / gradients) if gradients > 0 else np.nan

    def compile_seconds(self) -> float:
        """How much longer the first exact draw took than a typical one: the compilation."""
        if len(self.exact) < 2:
            return 0.0
        return max(0.0, self.exact[0] - float(np.median(self.exact[1:])))

    def surrogate_draw_seconds(self) -> float:
        """Mean seconds of the draws since the last fit, the first two left out (NaN before)."""
        recent = self.surrogate[2:]
        return float(np.mean(recent)) if recent else np.nan


def logp_function_pays(
    seconds_per_gradient: float, compile_seconds: float, evaluations_left: int
) -> bool:
    """Whether compiling the logp-only function costs less than it can save.

    It saves at most ``GRADIENT_SHARE`` of a joint evaluation at each of ``evaluations_left``
    end points (all the chains' that share it); ``compile_seconds`` is what it costs before
    its first answer: about what compiling the joint function did (the first exploration
    draw's excess; zero where the functions were compiled before sampling), and building its
    graph where that is still to come
    (:meth:`~pymc_rnshmc.step_methods.exact_model.ExactModel.logp_function_seconds`). Unknown
    costs keep the logp-only function.
    """
    if not np.isfinite(seconds_per_gradient):
        return True
    return GRADIENT_SHARE * seconds_per_gradient * evaluations_left >= compile_seconds


def refit_pays(
    last_fit_seconds: float,
    growth: float,
    surrogate_draw_seconds: float,
    exact_draw_seconds: float,
    draws_left: float,
) -> bool:
    """Whether a refit on ``growth`` times the last fit's points is worth its predicted cost.

    Its cost is predicted as ``last_fit_seconds * growth ** FIT_COST_EXPONENT``. It may be at
    most ``REFIT_SHARE`` of what the surrogate's draws save against exact NUTS draws over the
    ``draws_left`` tuning and kept draws still to come (all chains' for a population), at the
    measured seconds of each kind of draw. Unknown costs refit.
    """
    measured = [last_fit_seconds, surrogate_draw_seconds, exact_draw_seconds]
    if not np.all(np.isfinite(measured)):
        return True
    predicted = last_fit_seconds * max(growth, 1.0) ** FIT_COST_EXPONENT
    saving = max(exact_draw_seconds - surrogate_draw_seconds, 0.0) * draws_left
    return predicted <= REFIT_SHARE * saving


def effective_draws_per_draw(positions: np.ndarray, reference: np.ndarray | None = None) -> float:
    """Min over coordinates of the ESS per draw of ``q`` and of ``(q - mean)^2``.

    ``positions`` is one chain's draws ``(n, d)``; Geyer's initial positive sequence, as the
    trajectory choice scores its simulated chains. ``reference`` (draws ``(m, d)``, default
    ``positions``) gives the mean and variance the autocorrelations are taken about: a window
    that has not yet crossed the posterior varies less about the reference's mean than the
    reference does, and its ESS comes out low, as it should.
    """
    positions = np.asarray(positions, dtype=float)
    if positions.ndim != 2 or positions.shape[0] < 4:
        return np.nan
    reference = positions if reference is None else np.asarray(reference, dtype=float)
    centre = reference.mean(axis=0)
    squares, reference_squares = (positions - centre) ** 2, (reference - centre) ** 2
    both = np.concatenate([positions, squares], axis=1)[None]
    reference_both = np.concatenate([reference, reference_squares], axis=1)
    mean, variance = reference_both.mean(axis=0), reference_both.var(axis=0)
    return float(np.min(effective_sample_size_per_draw(both, mean, variance)))


@dataclass(frozen=True)
class Verdict:
    """The measured costs behind :func:`sampling_verdict`'s answer."""

    exact_seconds: float
    exact_ess: float
    """Effective draws per exact draw."""
    surrogate_seconds: float
    surrogate_ess: float
    exact_draws: int
    """Draws behind ``exact_ess``."""
    surrogate_draws: int
    fit_error: float = np.nan
    """The surrogate's held-out gradient error (NaN: not known, or a fit to values only)."""
    new_metric: bool = False
    """Whether exact NUTS would continue with a metric from the chain's correlated draws, which
    the exploration measured here did not have."""

    @property
    def exact_cost(self) -> float:
        """Seconds per effective draw of exact NUTS."""
        return self.exact_seconds / max(self.exact_ess, 1e-12)

    @property
    def surrogate_cost(self) -> float:
        """Seconds per effective draw of the surrogate."""
        return self.surrogate_seconds / max(self.surrogate_ess, 1e-12)

    @property
    def reliable(self) -> bool:
        """Whether both costs are known and NUTS's rests on ``VERDICT_MIN_ESS`` effective draws."""
        if not all(np.isfinite([self.exact_cost, self.surrogate_cost])):
            return False
        return self.exact_ess * self.exact_draws >= VERDICT_MIN_ESS

    @property
    def poor_fit(self) -> bool:
        """A fit above ``VERDICT_FIT_ERROR``, unless its draws are ``VERDICT_COST_RATIO`` cheaper.

        Whatever they cost where exact NUTS would take a new metric (:attr:`new_metric`): its
        exploration then measured a sampler that exact NUTS would not be.
        """
        cheaper = self.exact_seconds >= VERDICT_COST_RATIO * self.surrogate_seconds
        return bool(self.fit_error > VERDICT_FIT_ERROR) and (self.new_metric or not cheaper)

    @property
    def kept_poor_fit(self) -> bool:
        """A poor fit kept for its cheap draws.

        Its trajectories were chosen without a scan (:meth:`Economy.skips_setup`), so its
        warm-up refits at once.
        """
        return self.surrogate_pays and bool(self.fit_error > VERDICT_FIT_ERROR)

    @property
    def surrogate_pays(self) -> bool:
        """Unless a poor fit, or reliably measured to cost ``VERDICT_MARGIN`` times NUTS or more."""
        if self.poor_fit:
            return False
        return not self.reliable or self.surrogate_cost <= VERDICT_MARGIN * self.exact_cost

    def reason(self, exact: str = "exact NUTS") -> str:
        """The measurements, in one sentence's worth of words; ``exact`` names the exact sampler."""
        if self.poor_fit and self.new_metric:
            return (
                f"its fit's held-out gradient error is {100 * self.fit_error:.0f} %, and the "
                f"chain's draws are correlated enough to give {exact} a better metric than the "
                "one its exploration had"
            )
        if self.poor_fit:
            return (
                f"its fit's held-out gradient error is {100 * self.fit_error:.0f} %, and its "
                f"draws took {1e3 * self.surrogate_seconds:.3g} ms against "
                f"{1e3 * self.exact_seconds:.3g} ms with {exact}, measured while tuning"
            )
        return (
            f"its draws took {1e3 * self.surrogate_seconds:.3g} ms for "
            f"{self.surrogate_ess:.2f} effective draws each, against "
            f"{1e3 * self.exact_seconds:.3g} ms for {self.exact_ess:.2f} with {exact}, measured "
            "while tuning"
        )


def sampling_verdict(
    seconds: tuple[float, float],
    exploration: np.ndarray,
    since_fit: np.ndarray,
    fit_error: float = np.nan,
    new_metric: bool = False,
) -> Verdict:
    """Seconds per effective draw of the surrogate's draws against the exploration's.

    ``seconds`` are an exact NUTS draw's and a surrogate draw's (:class:`DrawCosts`).
    ``exploration`` and ``since_fit`` are the chain's positions ``(n, d)``: its exploration draws
    (the last half is used, where NUTS has adapted) and its draws since the fit. Each window's
    ESS is taken about the mean and variance of both together. ``fit_error``: the surrogate's
    held-out gradient error.
    """
    half = exploration[len(exploration) // 2 :]
    both = np.concatenate([half, since_fit])
    exact_seconds, surrogate_seconds = seconds
    return Verdict(
        exact_seconds=exact_seconds,
        exact_ess=effective_draws_per_draw(half, both),
        surrogate_seconds=surrogate_seconds,
        surrogate_ess=effective_draws_per_draw(since_fit, both),
        exact_draws=len(half),
        surrogate_draws=len(since_fit),
        fit_error=float(fit_error),
        new_metric=bool(new_metric),
    )


def unchecked_fit_too_poor(fit_error: float) -> bool:
    """Whether a first fit made as tuning ends is too poor to draw with (NaN: not known).

    Such a fit is never checked: no draws of its are measured, no step size is adapted on the
    exact acceptance, and no verdict or collapse watch comes after it. The verdict gives a fit
    above ``VERDICT_FIT_ERROR`` up unless its draws are measured to be ``VERDICT_COST_RATIO``
    times cheaper; with nothing measured, it is given up. It happens where tuning ends before
    the exploration does (on PyMC 5, which does not tell the step its tuning length). Measured:
    a stochastic-volatility model (a Gaussian random walk of 100 steps and its scale, PyMC
    5.28, ``tune=500``) fitted as tuning ended with a held-out gradient error of 60 %; its
    exact acceptance was 0.00 in the first 200 kept draws, 908 of the 1000 stayed put, and
    the bulk ESS was 3 (``benchmarks/user_models.py``).
    """
    return bool(fit_error > VERDICT_FIT_ERROR)


EXPLORATION_PHASE, SURROGATE_PHASES = 0, (1, 2)
"""A draw's ``phase`` stat: an exact exploration draw; a surrogate move or a safety-net draw."""


@dataclass
class Economy:
    """A warm-up's account of what its surrogate costs, and the choices it settles.

    Fed each tuning draw's seconds (:meth:`note_draw`) and each fit (:meth:`surrogate_started`,
    :meth:`fit_took`); asked whether a refit pays (:meth:`refit_pays`) and, once, whether the
    surrogate does (:meth:`judge`). With ``weighs`` false it still measures, but never says no.
    """

    weighs: bool = True
    costs: DrawCosts = field(default_factory=DrawCosts)
    first_fit_at: int | None = None
    """The iteration of the first surrogate's fit (its exploration ends there)."""
    fitted_at: int | None = None
    """The iteration of the current surrogate's fit."""
    fit_points: int = 0
    fit_seconds: float = np.nan
    """Points and seconds of the last fit or refit."""
    refits: int = 0
    verdict: Verdict | None = None

    def note_draw(self, phase: int, gradients: int, seconds: float) -> None:
        """One tuning draw's ``phase`` stat, gradient evaluations and seconds (fits left out)."""
        if phase == EXPLORATION_PHASE:
            self.costs.note_exact(seconds, gradients)
        elif phase in SURROGATE_PHASES:
            self.costs.note_surrogate(seconds)

    def surrogate_started(self, iteration: int) -> None:
        """A surrogate was installed at ``iteration``: its draws are measured afresh."""
        self.costs.fitted()
        self.fitted_at = iteration
        if self.first_fit_at is None:
            self.first_fit_at = iteration

    def fit_took(self, points: int, seconds: float, refit: bool) -> None:
        """A fit (or ``refit``) on ``points`` took ``seconds``."""
        self.fit_points, self.fit_seconds = int(points), float(seconds)
        self.refits += int(refit)

    def setup_budget(self, draws_left: float, spent: float = 0.0) -> float:
        """Seconds the chain's next fit and its trajectory choice may take (``inf``: unbounded).

        ``SETUP_SHARE`` of the exact NUTS seconds of ``draws_left`` draws (all chains'), at
        the exploration's measured seconds per draw, less the ``spent`` seconds of the chain's
        earlier fits: one budget for all of a chain's setup, not one per fit. Unbounded when
        not weighing, or before two exploration draws were measured.
        """
        seconds = self.costs.exact_draw_seconds()
        if not self.weighs or not np.isfinite(seconds):
            return np.inf
        return SETUP_SHARE * seconds * draws_left - spent

    def fit_limit(self, draws_left: float) -> float:
        """Seconds the chain's first fit may take (``inf``: unbounded).

        ``FIT_LIMIT_SHARE`` of what exact NUTS would need for the ``draws_left`` draws still to
        come (all chains'), at the exploration's measured seconds per draw. Unbounded when not
        weighing, or before two exploration draws were measured.
        """
        seconds = self.costs.exact_draw_seconds()
        if not self.weighs or not np.isfinite(seconds):
            return np.inf
        return FIT_LIMIT_SHARE * seconds * draws_left

    def skips_setup(self, fit_error: float, tuning_draws_left: int | None) -> bool:
        """Whether a fit's trajectory choice scores its first metric and nothing more.

        True for a fit whose held-out gradient error ``fit_error`` is above
        ``VERDICT_FIT_ERROR`` while the verdict is still to come (``tuning_draws_left``, per
        chain, leave its ``VERDICT_DRAWS``; ``None``: not known). The verdict gives such a fit
        up unless its draws are at least ``VERDICT_COST_RATIO`` times cheaper than exact
        NUTS's, and the budget is kept for the surrogates it keeps (their refit: see
        :attr:`Verdict.kept_poor_fit`). On the Student-t posterior the scan had spent the
        whole budget (0.23-0.33 s of calls of 1.3-1.5 s) on surrogates given up a hundred draws
        later.
        """
        verdict_ahead = tuning_draws_left is None or tuning_draws_left >= VERDICT_DRAWS
        return (
            self.weighs
            and self.verdict is None
            and verdict_ahead
            and bool(fit_error > VERDICT_FIT_ERROR)
        )

    def refit_pays(self, record_size: int, draws_left: float) -> bool:
        """Whether a refit on ``record_size`` points pays over ``draws_left`` draws (all chains').

        The first refit is always made (a first fit on a short exploration is often poor: on
        the elliptic PDE, 30 x 30, a first fit kept to the end gave a tail ESS per draw of 0.10
        against 0.62 with its refits). See :func:`refit_pays`.
        """
        if self.refits == 0 or not self.weighs:
            return True
        growth = record_size / max(self.fit_points, 1)
        costs = self.costs
        seconds = (costs.surrogate_draw_seconds(), costs.exact_draw_seconds())
        return refit_pays(self.fit_seconds, growth, *seconds, draws_left)

    @property
    def verdict_due(self) -> bool:
        """Whether the first surrogate has made the draws to judge it (judged once)."""
        return (
            self.weighs
            and self.verdict is None
            and self.first_fit_at is not None
            and len(self.costs.surrogate) >= VERDICT_DRAWS
        )

    def judge(
        self, draws: np.ndarray, fit_error: float = np.nan, new_metric: bool = False
    ) -> Verdict:
        """The verdict on the chain's ``draws`` so far ``(n, d)``: exploration against since fit.

        ``fit_error``: the current surrogate's held-out gradient error (NaN if not known);
        ``new_metric``: whether exact NUTS would continue with a metric from the draws.
        """
        exploration, since_fit = draws[: self.first_fit_at], draws[self.fitted_at :]
        seconds = (self.costs.exact_draw_seconds(), self.costs.surrogate_draw_seconds())
        self.verdict = sampling_verdict(seconds, exploration, since_fit, fit_error, new_metric)
        return self.verdict
