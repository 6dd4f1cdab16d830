"""Processes that no short basis expansion represents: bumps and time warps.

Both draw a few random parameters per subject and evaluate a non-linear
function of them. Their mean and covariance are Monte Carlo estimates from a
large fixed-seed sample on a fine grid (:class:`MonteCarloProcess`), kept as
an eigen-decomposition whose eigenvectors are interpolated by cubic splines,
so that ``covariance(s, t)`` is defined at any times and is exactly positive
semi-definite.
"""

from __future__ import annotations

import numbers

import numpy as np
from scipy.interpolate import CubicSpline

__all__ = [
    "MonteCarloProcess",
    "PhaseProcess",
    "WarpedProcess",
]

# eigenvalues below this share of the largest are dropped (rounding noise)
_EIG_RTOL = 1e-10


def _check_int(name, value, low):
    if (
        not isinstance(value, numbers.Integral)
        or isinstance(value, bool)
        or value < low
    ):
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def _check_range(name, value, low=0.0):
    try:
        lo, hi = (float(v) for v in value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a pair (low, high), got {value!r}") from None
    if not low <= lo <= hi:
        raise ValueError(f"{name} must satisfy {low} <= low <= high, got {value!r}")
    return lo, hi


class MonteCarloProcess:
    """Base of the non-linear processes: moments from a fixed-seed sample.

    A subclass draws its per-subject parameters (``_draw``) and evaluates
    curves from them (``_values``); this class adds ``curves``,
    ``evaluate``, and the Monte Carlo ``mean``, ``covariance``, ``variance``
    and eigen-decomposition used by :class:`fdaimpute.oracle.ConditionalMean`.

    Parameters
    ----------
    noise_sd : float
        Standard deviation of the measurement error.
    domain : tuple of float
        The time interval.
    n_mc : int
        Number of curves of the Monte Carlo sample.
    mc_grid : int
        Points of the equally spaced grid the moments are estimated on.
    mc_seed : int
        Seed of the Monte Carlo sample (fixed, so the moments are too).
    """

    def __init__(self, noise_sd, domain, n_mc, mc_grid, mc_seed):
        if not np.isfinite(noise_sd) or noise_sd < 0:
            raise ValueError(f"noise_sd must be >= 0, got {noise_sd}")
        a, b = (float(v) for v in domain)
        if not a < b:
            raise ValueError(f"domain must be an interval (a, b) with a < b: {domain}")
        self.noise_sd = float(noise_sd)
        self.domain = (a, b)
        self.n_mc = _check_int("n_mc", n_mc, 100)
        self.mc_grid = _check_int("mc_grid", mc_grid, 11)
        self.mc_seed = mc_seed
        # shared by shallow copies (sample's snr copy), which keep the moments
        self._moments = {}

    def sample_scores(self, n, random_state=None):
        """Draw the random parameters of ``n`` subjects, shape ``(n, n_params)``."""
        return self._draw(int(n), np.random.default_rng(random_state))

    def curves(self, scores, t):
        """Curves with these parameters at times ``t``, shape ``(n, len(t))``."""
        t = np.asarray(t, dtype=np.float64)
        return self._values(np.atleast_2d(scores), t[None, :])

    def evaluate(self, scores, t):
        """Curve of row ``j`` of ``scores`` at time ``t[j]``, shape ``(len(t),)``."""
        t = np.asarray(t, dtype=np.float64)
        return self._values(np.atleast_2d(scores), t[:, None])[:, 0]

    def _fit_moments(self):
        if not self._moments:
            grid = np.linspace(*self.domain, self.mc_grid)
            x = self.curves(self.sample_scores(self.n_mc, self.mc_seed), grid)
            mean = x.mean(axis=0)
            xc = x - mean
            cov = xc.T @ xc / (self.n_mc - 1)
            lam, vec = np.linalg.eigh(cov)
            lam, vec = lam[::-1], vec[:, ::-1]
            keep = lam > _EIG_RTOL * lam[0]
            self._moments.update(
                grid=grid,
                mean=CubicSpline(grid, mean),
                eigenvalues=lam[keep],
                eigenvectors=CubicSpline(grid, vec[:, keep]),
            )
        return self._moments

    def mean(self, t):
        """Monte Carlo mean function at times ``t``."""
        t = np.asarray(t, dtype=np.float64)
        return self._fit_moments()["mean"](t)

    @property
    def eigenvalues(self):
        """Eigenvalues of the Monte Carlo covariance matrix kept (decreasing)."""
        return self._fit_moments()["eigenvalues"]

    def eigenbasis(self, t):
        """Its eigenvectors, spline-interpolated to ``t``: ``(len(t), n_kept)``."""
        return self._fit_moments()["eigenvectors"](np.asarray(t, dtype=np.float64))

    def covariance(self, s, t):
        """Monte Carlo ``Cov(X(s_a), X(t_b))``, shape ``(len(s), len(t))``."""
        return (self.eigenbasis(s) * self.eigenvalues) @ self.eigenbasis(t).T

    def variance(self, t):
        """Pointwise Monte Carlo variance ``Var X(t)``."""
        b = self.eigenbasis(t)
        return (b * b) @ self.eigenvalues

    def derivative(self, scores, t, eps=1e-6):
        """Derivatives of the curves with these parameters (central differences)."""
        t = np.asarray(t, dtype=np.float64)
        return (self.curves(scores, t + eps) - self.curves(scores, t - eps)) / (2 * eps)


class PhaseProcess(MonteCarloProcess):
    """Gaussian bumps at random places, of random widths and heights.

    ``X(t) = L + S (t - m) / (b - a) + sum_j H_j exp(-(t - C_j)^2 / (2 W_j^2))``
    with ``C_j = centres[j] + shift * U_j``, ``U_j ~ Uniform(-1, 1)``,
    ``W_j ~ Uniform(width)``, ``H_j ~ Uniform(height)`` and a random
    baseline ``L, S ~ N(0, baseline_sd^2)`` (``m`` the domain's middle), all
    independent. A linear predictor smears a bump over every place it could
    be; knowing it is one bump, a few points near it fix where it is.

    The defaults (two bumps of SD 0.05-0.08 that move by up to 0.12) make
    the bumps narrow enough for the linear oracle to be clearly beaten by the
    conditional mean, and wide enough for PACE's smoothed covariance to come
    close to the linear oracle (see ``docs/benchmarks.md``).

    Parameters
    ----------
    centres : sequence of float, default=(0.3, 0.7)
        Centre of each bump's location range (one bump per entry).
    shift : float, default=0.12
        Half-width of each location's uniform range: how variable the
        locations are. ``centre +- shift`` must lie inside the domain.
    width : pair of float, default=(0.05, 0.08)
        Range of the bumps' standard deviations.
    height : pair of float, default=(0.6, 1.4)
        Range of the bumps' heights.
    baseline_sd : float, default=0.0
        SD of the random level and slope of the baseline.
    noise_sd : float, default=0.0
        Standard deviation of the measurement error.
    domain : tuple of float, default=(0.0, 1.0)
        The time interval.
    n_mc, mc_grid, mc_seed : int, default=20_000, 201, 0
        Size, grid and seed of the Monte Carlo sample for the moments.

    Notes
    -----
    ``sample_scores`` returns, per subject, the locations ``C_1..C_J``, the
    widths ``W_1..W_J``, the heights ``H_1..H_J``, then ``L`` and ``S``.

    Examples
    --------
    >>> import numpy as np
    >>> from fdaimpute.simulate import PhaseProcess
    >>> proc = PhaseProcess(centres=(0.5,), shift=0.2)
    >>> params = proc.sample_scores(3, random_state=0)
    >>> params.shape
    (3, 5)
    >>> proc.curves(params, np.linspace(0, 1, 11)).shape
    (3, 11)
    """

    def __init__(
        self,
        centres=(0.3, 0.7),
        shift=0.12,
        width=(0.05, 0.08),
        height=(0.6, 1.4),
        baseline_sd=0.0,
        noise_sd=0.0,
        domain=(0.0, 1.0),
        n_mc=20_000,
        mc_grid=201,
        mc_seed=0,
    ):
        super().__init__(noise_sd, domain, n_mc, mc_grid, mc_seed)
        self.centres = np.atleast_1d(np.asarray(centres, dtype=np.float64))
        if self.centres.ndim != 1 or self.centres.size == 0:
            raise ValueError(f"centres must be a non-empty sequence, got {centres!r}")
        if not np.isfinite(shift) or shift < 0:
            raise ValueError(f"shift must be >= 0, got {shift!r}")
        a, b = self.domain
        if self.centres.min() - shift < a or self.centres.max() + shift > b:
            raise ValueError(
                f"every centre +- shift must lie in the domain {self.domain}: "
                f"centres={self.centres.tolist()}, shift={shift}"
            )
        self.shift = float(shift)
        self.width = _check_range("width", width)
        if self.width[0] <= 0:
            raise ValueError(f"width must be positive, got {width!r}")
        self.height = _check_range("height", height, low=-np.inf)
        if not np.isfinite(baseline_sd) or baseline_sd < 0:
            raise ValueError(f"baseline_sd must be >= 0, got {baseline_sd!r}")
        self.baseline_sd = float(baseline_sd)

    @property
    def n_bumps(self):
        """Number of bumps per curve."""
        return self.centres.size

    def _draw(self, n, rng):
        j = self.n_bumps
        loc = self.centres + self.shift * rng.uniform(-1.0, 1.0, (n, j))
        wid = rng.uniform(*self.width, (n, j))
        hgt = rng.uniform(*self.height, (n, j))
        base = self.baseline_sd * rng.standard_normal((n, 2))
        return np.concatenate([loc, wid, hgt, base], axis=1)

    def _values(self, params, t):
        j = self.n_bumps
        loc, wid, hgt = (params[:, k * j : (k + 1) * j, None] for k in range(3))
        a, b = self.domain
        z = (t[:, None, :] - loc) / wid
        bumps = np.sum(hgt * np.exp(-0.5 * z * z), axis=1)
        slope = params[:, 3 * j + 1, None] * (t - 0.5 * (a + b)) / (b - a)
        return params[:, 3 * j, None] + slope + bumps

    def __repr__(self):
        return (
            f"PhaseProcess(n_bumps={self.n_bumps}, shift={self.shift:.4g}, "
            f"noise_sd={self.noise_sd:.4g})"
        )


def _two_peaks(u):
    """Default template on [0, 1]: peaks at 0.3 (height 1) and 0.65 (0.7)."""
    return np.exp(-0.5 * ((u - 0.3) / 0.07) ** 2) + 0.7 * np.exp(
        -0.5 * ((u - 0.65) / 0.07) ** 2
    )


class WarpedProcess(MonteCarloProcess):
    """A fixed template under a random monotone time warp, times an amplitude.

    ``X(t) = A f(h_B(u))`` with ``u = (t - a) / (b - a)``,
    ``h_B(u) = (exp(B u) - 1) / (exp(B) - 1)`` (``h_0(u) = u``): strictly
    increasing with ``h(0) = 0`` and ``h(1) = 1`` for every real ``B``.
    ``B ~ N(0, warp_sd^2)`` and ``A ~ N(1, amplitude_sd^2)``, independent.
    The curves form a two-parameter family, but a curved one: moving the
    peaks takes many eigenfunctions of the covariance, and the linear
    predictor blurs the peaks where a fit of ``A`` and ``B`` does not.

    The default ``warp_sd=0.8`` moves the first peak by about +-0.08 (one SD
    of ``B``), larger than its width 0.07: the linear oracle then blurs it
    while PACE, whose covariance is smooth enough here, comes close to the
    linear oracle (see ``docs/benchmarks.md``).

    Parameters
    ----------
    template : callable, default=None
        ``f(u)`` on ``[0, 1]``, vectorised; default two Gaussian peaks (SD
        0.07) at 0.3 (height 1) and 0.65 (height 0.7).
    warp_sd : float, default=0.8
        SD of the warp parameter ``B``.
    amplitude_sd : float, default=0.2
        SD of the amplitude ``A`` around 1.
    noise_sd : float, default=0.0
        Standard deviation of the measurement error.
    domain : tuple of float, default=(0.0, 1.0)
        The time interval.
    n_mc, mc_grid, mc_seed : int, default=20_000, 201, 0
        Size, grid and seed of the Monte Carlo sample for the moments.

    Notes
    -----
    ``sample_scores`` returns, per subject, ``A`` and ``B``.

    Examples
    --------
    >>> import numpy as np
    >>> from fdaimpute.simulate import WarpedProcess
    >>> proc = WarpedProcess(warp_sd=1.0)
    >>> params = proc.sample_scores(2, random_state=0)
    >>> h = proc.warp(params, np.array([0.0, 0.5, 1.0]))
    >>> np.allclose(h[:, [0, 2]], [0.0, 1.0])
    True
    """

    def __init__(
        self,
        template=None,
        warp_sd=0.8,
        amplitude_sd=0.2,
        noise_sd=0.0,
        domain=(0.0, 1.0),
        n_mc=20_000,
        mc_grid=201,
        mc_seed=0,
    ):
        super().__init__(noise_sd, domain, n_mc, mc_grid, mc_seed)
        if template is not None and not callable(template):
            raise TypeError(f"template must be callable, got {type(template)}")
        for name, value in (("warp_sd", warp_sd), ("amplitude_sd", amplitude_sd)):
            if not np.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be >= 0, got {value!r}")
        self.template = _two_peaks if template is None else template
        self.warp_sd = float(warp_sd)
        self.amplitude_sd = float(amplitude_sd)

    def _draw(self, n, rng):
        amp = 1.0 + self.amplitude_sd * rng.standard_normal(n)
        return np.stack([amp, self.warp_sd * rng.standard_normal(n)], axis=1)

    def _unit_warp(self, b, t):
        a, end = self.domain
        u = (t - a) / (end - a)
        small = np.abs(b) < 1e-8
        safe = np.where(small, 1.0, b)
        return np.where(small, u, np.expm1(safe * u) / np.expm1(safe))

    def warp(self, scores, t):
        """The warps ``h(t)`` (in domain units) of these subjects at ``t``."""
        t = np.asarray(t, dtype=np.float64)[None, :]
        a, b = self.domain
        return a + (b - a) * self._unit_warp(np.atleast_2d(scores)[:, 1, None], t)

    def _values(self, params, t):
        u = self._unit_warp(params[:, 1, None], t)
        return params[:, 0, None] * np.asarray(self.template(u), dtype=np.float64)

    def __repr__(self):
        return (
            f"WarpedProcess(warp_sd={self.warp_sd:.4g}, "
            f"amplitude_sd={self.amplitude_sd:.4g}, noise_sd={self.noise_sd:.4g})"
        )
