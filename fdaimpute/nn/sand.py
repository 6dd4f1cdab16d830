"""SAND: self-attention on derivatives, and integration on a grid.

SAND turns a rough curve ``T~`` on a grid into a smooth one: a softmax-free
attention layer (``Diff``) maps ``[T~ - T~_1, enc(s)]`` to a derivative
``D~`` on the grid, and the curve is ``T~_1 + Intg(D~)``. Integration is the
cumulative trapezoidal rule, which is exact for the piecewise-quadratic C1
curve whose derivative interpolates ``D~`` linearly; that curve is how SAND
is evaluated between grid points (:func:`interpolate_c1`).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from fdaimpute.nn.encoding import SinusoidalEncoding

__all__ = [
    "ANCHORS",
    "SANDLayer",
    "SANDModule",
    "cumulative_integral",
    "integrate",
    "interpolate_c1",
    "interpolate_linear",
    "mean_anchored_integral",
    "two_sided_integral",
]

ANCHORS = (None, "mean", "two-sided")


def cumulative_integral(deriv, grid):
    """Cumulative trapezoidal integral of ``deriv`` on ``grid``, zero at the start.

    Parameters
    ----------
    deriv : Tensor of shape (B, M)
        Derivative values at the grid points.
    grid : Tensor of shape (M,)
        Increasing grid.

    Returns
    -------
    Tensor of shape (B, M)

    Examples
    --------
    >>> import torch
    >>> from fdaimpute.nn import cumulative_integral
    >>> cumulative_integral(torch.ones(1, 3), torch.tensor([0.0, 0.5, 1.0]))
    tensor([[0.0000, 0.5000, 1.0000]])
    """
    inc = 0.5 * (deriv[:, 1:] + deriv[:, :-1]) * torch.diff(grid)
    return torch.cat([torch.zeros_like(deriv[:, :1]), torch.cumsum(inc, dim=1)], dim=1)


def integrate(deriv, grid, start):
    """Curve with derivative ``deriv`` that starts at ``start``: ``start + Intg``.

    Examples
    --------
    >>> import torch
    >>> from fdaimpute.nn import integrate
    >>> s = torch.linspace(0, 1, 5)
    >>> integrate(2 * s[None], s, torch.tensor([1.0]))
    tensor([[1.0000, 1.0625, 1.2500, 1.5625, 2.0000]])
    """
    return start.unsqueeze(-1) + cumulative_integral(deriv, grid)


def two_sided_integral(values, deriv, grid, anchors):
    """Integrate from the nearest anchors on both sides and blend by distance.

    Between two anchors ``a < m < b`` the curve is the distance-weighted
    mean of ``values[a] + int_a^m deriv`` (weight ``(s_b - s_m) / (s_b -
    s_a)``) and ``values[b] - int_m^b deriv``; before the first and after
    the last anchor only one side exists. The result equals ``values``
    exactly at the anchors; it is continuous, but its derivative jumps at
    the anchors by the disagreement of the two sides.

    Parameters
    ----------
    values : Tensor of shape (B, M)
        Curve values; only those at anchors are used.
    deriv : Tensor of shape (B, M)
        Derivative on the grid.
    grid : Tensor of shape (M,)
        Increasing grid.
    anchors : bool Tensor of shape (B, M)
        Anchor grid points; every row needs at least one.

    Returns
    -------
    Tensor of shape (B, M)

    Examples
    --------
    >>> import torch
    >>> from fdaimpute.nn import two_sided_integral
    >>> s = torch.linspace(0, 1, 5)
    >>> anchors = torch.tensor([[False, True, False, False, True]])
    >>> out = two_sided_integral(torch.arange(5.0)[None], torch.zeros(1, 5), s, anchors)
    >>> out.round(decimals=4).tolist()
    [[1.0, 1.0, 2.0, 3.0, 4.0]]
    """
    if not bool(anchors.any(dim=1).all()):
        raise ValueError("every row needs at least one anchor")
    m = grid.shape[0]
    cum = cumulative_integral(deriv, grid)
    offset = values - cum
    idx = torch.arange(m, device=deriv.device).expand_as(anchors)
    left = torch.where(anchors, idx, -1).cummax(dim=1).values
    right = torch.where(anchors, idx, m).flip(1).cummin(dim=1).values.flip(1)
    has_left, has_right = left >= 0, right < m
    left, right = left.clamp(min=0), right.clamp(max=m - 1)
    s_left, s_right = grid[left], grid[right]
    span = (s_right - s_left).clamp(min=torch.finfo(grid.dtype).tiny)
    w_left = torch.where(right > left, (s_right - grid) / span, 1.0)
    w_left = torch.where(has_left & has_right, w_left, has_left.to(deriv.dtype))
    blended = w_left * offset.gather(1, left) + (1 - w_left) * offset.gather(1, right)
    return torch.where(anchors, values, cum + blended)


def mean_anchored_integral(values, deriv, grid, weights):
    """Integral of ``deriv`` whose constant is fitted to ``values`` by least squares.

    Equivalent to anchoring at each weighted grid point in turn and
    averaging the curves: ``Intg(deriv) + sum_m w_m (values_m - Intg_m) /
    sum_m w_m``. The result stays C1 with derivative ``deriv``.

    Parameters
    ----------
    values, deriv : Tensor of shape (B, M)
        Curve values and derivative on the grid.
    grid : Tensor of shape (M,)
        Increasing grid.
    weights : Tensor of shape (B, M)
        Non-negative weight of each grid point (e.g. 1 at a subject's
        observed grid points); every row needs a positive total.

    Returns
    -------
    Tensor of shape (B, M)
    """
    cum = cumulative_integral(deriv, grid)
    w = weights.to(deriv.dtype)
    offset = ((values - cum) * w).sum(dim=1) / w.sum(dim=1)
    return cum + offset.unsqueeze(-1)


def _locate(grid, t):
    """Left grid index (clamped to ``[0, M-2]``), step and offset of each time."""
    pos = (torch.searchsorted(grid, t.contiguous(), right=True) - 1).clamp(
        0, grid.shape[0] - 2
    )
    step = grid[pos + 1] - grid[pos]
    return pos, step, t - grid[pos]


def interpolate_linear(curve, grid, t):
    """Piecewise-linear interpolation of each row of ``curve`` at its times ``t``.

    Parameters
    ----------
    curve : Tensor of shape (B, M)
        Values on ``grid``.
    grid : Tensor of shape (M,)
        Increasing grid.
    t : Tensor of shape (B, L)
        Query times of each row (linear extrapolation outside the grid).

    Returns
    -------
    Tensor of shape (B, L)
    """
    pos, step, dt = _locate(grid, t)
    left, right = curve.gather(1, pos), curve.gather(1, pos + 1)
    return left + (dt / step) * (right - left)


def interpolate_c1(curve, deriv, grid, t):
    """Evaluate the C1 curve defined by grid values and a piecewise-linear derivative.

    On ``[s_j, s_j+1]`` the curve is ``curve_j + deriv_j u + (deriv_j+1 -
    deriv_j) u^2 / (2 h_j)`` with ``u = t - s_j``: the integral of the
    linear interpolation of ``deriv``. For SAND outputs (built by the
    trapezoidal rule) this reproduces ``curve`` at the grid points.

    Parameters
    ----------
    curve, deriv : Tensor of shape (B, M)
        Values and derivatives on ``grid``.
    grid : Tensor of shape (M,)
        Increasing grid.
    t : Tensor of shape (B, L)
        Query times of each row.

    Returns
    -------
    Tensor of shape (B, L)
    """
    pos, step, dt = _locate(grid, t)
    d0, d1 = deriv.gather(1, pos), deriv.gather(1, pos + 1)
    return curve.gather(1, pos) + d0 * dt + (d1 - d0) * dt * dt / (2 * step)


class SANDLayer(nn.Module):
    """Self-attention on derivatives: rough curve in, smooth curve and slope out.

    ``Diff`` is multi-head attention *without softmax* on the tokens
    ``Z_m = [T~_m - T~_1, enc(s_m)]``::

        D~_m = gain * sum_h W_O^h sum_j (q_m^h . k_j^h) v_j^h / (sqrt(h_d) * M)

    computed by expanding ``Q (K^T V) W_O`` in the curve (see
    :meth:`derivative`), which costs a few (B, M) x (M, H h_d) matmuls. The sum
    over the ``M`` grid points is averaged (``1 / M``, as in the released
    code) so its size does not depend on the grid, and ``gain`` restores the
    paper's scale at ``M = 101`` (derivatives of a standardised curve on
    [0, 1] are of order 10 to 100, far from the O(1) output of a freshly
    initialised layer; the scale speeds up training). The curve is then
    ``T~_1 + Intg(D~)`` (trapezoidal cumulative sum) or, with anchors, an
    integral pinned to ``T~`` elsewhere.

    Parameters
    ----------
    n_heads : int, default=2
        Heads ``H``.
    head_dim : int, default=64
        ``h_d``: the rank of each head's smoother (the paper's 64).
    encoding_dim : int, default=120
        Features ``p`` of the grid's sinusoidal encoding (the paper's 120).
        The smoother's rank is at most ``p + 1``, so keep it near ``M``.
    encoding_scale, encoding_base : float, default=100.0, 1e4
        Frequencies of the encoding (:func:`~fdaimpute.nn.sinusoidal_encoding`);
        the defaults are the paper's. SAND's curve lies in the span of the
        integrated features, so they must resolve the curves' frequencies:
        the estimators use ``scale = pi (M - 1) / 2`` (half the grid's
        Nyquist frequency) and ``base = 100`` (down to a quarter cycle over
        the range) instead.
    gain : float, default=100.0
        Fixed output scale (see above).
    whiten : bool, default=True
        Replace the grid's encoding ``E`` by ``E (E^T E / M + d I)^(-1/2)``
        (ridge whitening, ``d`` = 1e-4 times the largest eigenvalue): the
        same span with orthonormal directions. The paper's geometric
        frequencies make most of the ``p`` features nearly collinear on
        ``[0, 1]`` (about 25 effective directions of 120 at ``M = 101``),
        which slows gradient descent on SAND's weights by orders of
        magnitude. The map is a deterministic function of the grid, so
        saved models reproduce on any device.
    curve_in_scores : bool, default=False
        Let the centred curve enter the queries and keys as well as the
        values (the paper's literal ``Z``). ``False`` keeps queries and keys
        positional, so ``D~`` is an affine, rank ``H h_d`` smoothing and
        differentiation operator applied to the curve: a subset of the
        paper's parameter space that trains much faster and loses nothing
        measurable (see ``docs/neural.md``).

    Examples
    --------
    >>> import torch
    >>> from fdaimpute.nn import SANDLayer
    >>> sand = SANDLayer(n_heads=2, head_dim=8, encoding_dim=8)
    >>> s = torch.linspace(0, 1, 21)
    >>> curve, deriv = sand(torch.randn(4, 21), s)
    >>> curve.shape, deriv.shape
    (torch.Size([4, 21]), torch.Size([4, 21]))
    """

    def __init__(
        self,
        n_heads=2,
        head_dim=64,
        encoding_dim=120,
        encoding_scale=100.0,
        encoding_base=1e4,
        gain=100.0,
        whiten=True,
        curve_in_scores=False,
    ):
        super().__init__()
        self.n_heads = int(n_heads)
        self.head_dim = int(head_dim)
        self.gain = float(gain)
        self.whiten = bool(whiten)
        self.curve_in_scores = bool(curve_in_scores)
        self.encoding = SinusoidalEncoding(encoding_dim, encoding_scale, encoding_base)
        self.qkv = nn.Linear(1 + encoding_dim, 3 * self.n_heads * self.head_dim)
        self.out = nn.Linear(self.n_heads * self.head_dim, 1)
        if not self.curve_in_scores:
            with torch.no_grad():  # unused: keep them at zero for clarity
                self.qkv.weight[: 2 * self.n_heads * self.head_dim, 0] = 0.0
        self._features = None

    def grid_features(self, grid):
        """The grid's encoding as SAND sees it (whitened if ``whiten``), (M, p).

        Computed in float64 (the encoding, its Gram matrix and the whitening
        map) and returned in the layer's dtype on the grid's device. Cached
        per grid tensor (the training loop passes the same one on every
        step); the cache holds a reference to the grid, so its memory cannot
        be reused by another tensor while cached.
        """
        exact = self._grid_features64(grid)
        dtype = self.out.weight.dtype
        cached = self._features
        if cached[3] is None or cached[3].dtype != dtype:
            with torch.inference_mode(False), torch.no_grad():
                value = exact.to(grid.device, dtype)
            self._features = (*cached[:3], value)
        return self._features[3]

    def _grid_features64(self, grid):
        """:meth:`grid_features` in float64 on the CPU (cached with them)."""
        version = None if grid.is_inference() else grid._version
        cached = self._features
        if cached is None or cached[0] is not grid or cached[1] != version:
            with torch.inference_mode(False), torch.no_grad():
                enc = self.encoding(grid.detach().cpu().double().clone())
                if self.whiten:
                    gram = enc.T @ enc / enc.shape[0]
                    evals, evecs = torch.linalg.eigh(gram)
                    ridge = 1e-4 * evals.max().clamp(min=1e-300)
                    inv_sqrt = (evals.clamp(min=0) + ridge).rsqrt()
                    enc = enc @ ((evecs * inv_sqrt) @ evecs.T)
            self._features = (grid, version, enc, None)
        return self._features[2]

    @torch.no_grad()
    def init_identity(self, grid, ridge=1e-5, jitter=1e-3):
        """Set the weights so that SAND starts as a smoother that keeps its input.

        With positional queries and keys, ``D~ = kappa E G E^T c`` for the
        centred curve ``c`` (``E`` the grid features, ``kappa`` the fixed
        scale and ``G = sum_h alpha_h W_Q^h^T W_K^h``). ``G`` is set to the
        ridge least-squares solution of ``Intg(kappa E G E^T c) = c`` over
        all ``c`` with ``c_1 = 0``: SAND's curve is then ``T~`` projected on
        the integrated features' span (smooth curves pass through,
        grid-scale noise is damped), instead of the random curve a random
        start gives. ``G`` is factored over the heads by its SVD; the value
        and output weights are set so that each head passes ``c`` with
        weight 1 and no constant term. Training starts from there.

        ``G`` needs as many head dimensions (``n_heads * head_dim``) as the
        features have effective directions (about 44 for the estimators'
        encoding at ``M = 101``, well within the default 2 x 64); with fewer,
        the start keeps only ``G``'s leading singular directions.

        Parameters
        ----------
        grid : Tensor of shape (M,)
            The grid the layer will be used on.
        ridge : float, default=1e-5
            Ridge of the least-squares problem, relative to its largest
            squared singular value: larger values damp more noise and
            reproduce less of the input.
        jitter : float, default=1e-3
            Scale of the random part kept in the weights that the solution
            leaves at zero (so their gradients are not exactly zero).

        Returns
        -------
        self
        """
        m = grid.shape[0]
        n_heads, head_dim = self.n_heads, self.head_dim
        enc = self._grid_features64(grid)
        g64 = grid.detach().double().cpu()
        # column j of `integral` is the cumulative integral of the j-th unit vector
        integral = cumulative_integral(torch.eye(m, dtype=torch.float64), g64).T
        u_f, s_f, vt_f = torch.linalg.svd(integral @ enc, full_matrices=False)
        u_e, s_e, vt_e = torch.linalg.svd(enc[1:], full_matrices=False)
        target = torch.eye(m, dtype=torch.float64)[:, 1:]
        prod = s_f[:, None] * s_e[None, :]
        core = (u_f.T @ target @ u_e) * prod / (prod**2 + ridge * prod.max() ** 2)
        kappa = self.gain / (math.sqrt(head_dim) * m)
        u, s, vt = torch.linalg.svd(vt_f.T @ core @ vt_e / kappa)
        rank = min(s.numel(), n_heads * head_dim)
        root = s[:rank].sqrt()
        left = torch.zeros(self.encoding.dim, n_heads * head_dim, dtype=torch.float64)
        right = torch.zeros_like(left)
        left[:, :rank] = u[:, :rank] * root
        right[:, :rank] = vt[:rank].T * root

        w, b = self.qkv.weight, self.qkv.bias
        hd = n_heads * head_dim
        w[:hd, 1:] = left.T.to(w) + jitter * torch.randn_like(w[:hd, 1:])
        w[hd : 2 * hd, 1:] = right.T.to(w) + jitter * torch.randn_like(
            w[hd : 2 * hd, 1:]
        )
        b[: 2 * hd] = 0.0
        w[: 2 * hd, 0] = 0.0
        # values: v_j . o_h = c_j for every head (alpha_h = 1, no constant)
        o = self.out.weight.view(n_heads, head_dim)
        unit = o / o.pow(2).sum(-1, keepdim=True)
        w[2 * hd :, 0] = unit.flatten()
        wv = w[2 * hd :, 1:].view(n_heads, head_dim, -1)
        wv -= unit.unsqueeze(-1) * torch.einsum("hd,hdp->hp", o, wv).unsqueeze(1)
        bv = b[2 * hd :].view(n_heads, head_dim)
        bv -= unit * (o * bv).sum(-1, keepdim=True)
        self.out.bias.zero_()
        return self

    def _curve_weights(self):
        """Curve column of the query, key and value weights, each (H, h_d)."""
        wq, wk, wv = self.qkv.weight[:, 0].view(3, self.n_heads, self.head_dim)
        if not self.curve_in_scores:
            wq, wk = torch.zeros_like(wq), torch.zeros_like(wk)
        return wq, wk, wv

    def _shared(self, grid):
        """The grid's part of the query/key/value projections, (M, 3, H, h_d)."""
        w = self.qkv.weight
        enc = self.grid_features(grid).to(w.dtype)
        return F.linear(enc, w[:, 1:], self.qkv.bias).view(
            grid.shape[0], 3, self.n_heads, self.head_dim
        )

    def derivative(self, curve, grid):
        """``Diff(T~)``: the derivative on the grid, shape (B, M).

        Each token is ``z_m = [c_m, e_m]`` with ``c = T~ - T~_1``, so every
        projection is ``c_m w + P_m`` with ``P`` shared by all subjects.
        Expanding ``sum_j (q_m . k_j) (v_j . o)`` in ``c`` gives the same
        result as ``Q (K^T V) W_O`` with only (B, M) x (M, H h_d) products:
        no (B, M, H h_d) tensor is formed.
        """
        b, m = curve.shape
        c = curve - curve[:, :1]
        wq, wk, wv = self._curve_weights()
        pq, pk, pv = self._shared(grid).unbind(1)  # each (M, H, h_d)
        o = self.out.weight.view(self.n_heads, self.head_dim)
        alpha = (wv * o).sum(-1)  # (H,)   value . o = c_j alpha + pi_j
        pi = (pv * o).sum(-1)  # (M, H)
        c_pk = (c @ pk.flatten(1)).view(b, self.n_heads, self.head_dim)
        const = torch.einsum("mh,mhd->hd", pi, pk)
        # g_h = sum_j k_j (v_j . o_h), shape (B, H, h_d)
        g = alpha.unsqueeze(-1) * c_pk + const
        if self.curve_in_scores:  # the curve's own part of the keys and queries
            c_pi = c @ pi  # (B, H)
            sq = (c * c).sum(1, keepdim=True)  # (B, 1)
            g = g + (alpha * sq + c_pi).unsqueeze(-1) * wk
        deriv = g.flatten(1) @ pq.flatten(1).T
        if self.curve_in_scores:
            deriv = deriv + c * (g * wq).sum((1, 2)).unsqueeze(1)
        return deriv * (self.gain / (math.sqrt(self.head_dim) * m)) + self.out.bias

    def derivative_explicit(self, curve, grid):
        """``Diff(T~)`` computed literally as ``W_O Q (K^T V)`` (for checking)."""
        b, m = curve.shape
        c = curve - curve[:, :1]
        enc = self.grid_features(grid).to(c.dtype).expand(b, m, -1)
        z = torch.cat([c.unsqueeze(-1), enc], dim=-1)
        curve_w = torch.cat(self._curve_weights()).reshape(-1, 1)
        weight = torch.cat([curve_w, self.qkv.weight[:, 1:]], dim=1)
        q, k, v = (
            F.linear(z, weight, self.qkv.bias)
            .view(b, m, 3, self.n_heads, self.head_dim)
            .permute(2, 0, 3, 1, 4)
        )
        att = (q @ (k.transpose(-1, -2) @ v)) * (
            self.gain / (math.sqrt(self.head_dim) * m)
        )
        return self.out(att.transpose(1, 2).reshape(b, m, -1)).squeeze(-1)

    def forward(self, curve, grid, anchors=None, anchor_mode="two-sided"):
        """Smooth ``curve`` on ``grid``.

        Parameters
        ----------
        curve : Tensor of shape (B, M)
            The rough curve ``T~`` (detach it to keep SAND's loss out of
            the network that produced it).
        grid : Tensor of shape (M,)
            Increasing grid on the time scale of the encoding.
        anchors : Tensor of shape (B, M), default=None
            ``None``: plain SAND, ``T~_1 + Intg(D~)``. Otherwise a bool
            (``"two-sided"``) or non-negative weight (``"mean"``) per grid
            point; see :func:`two_sided_integral` and
            :func:`mean_anchored_integral`.
        anchor_mode : {"two-sided", "mean"}, default="two-sided"
            How anchors pin the integral.

        Returns
        -------
        smooth : Tensor of shape (B, M)
            SAND's curve.
        deriv : Tensor of shape (B, M)
            ``D~``, the derivative of the plain and ``"mean"`` curves.
        """
        deriv = self.derivative(curve, grid)
        if anchors is None:
            return integrate(deriv, grid, curve[:, 0]), deriv
        if anchor_mode == "mean":
            return mean_anchored_integral(curve, deriv, grid, anchors), deriv
        if anchor_mode == "two-sided":
            return two_sided_integral(curve, deriv, grid, anchors.bool()), deriv
        raise ValueError(
            f"anchor_mode must be 'two-sided' or 'mean', got {anchor_mode!r}"
        )


class SANDModule(nn.Module):
    """VT followed by SAND: ``SAND(T~)`` with ``T~`` from a :class:`VTModule`.

    Parameters
    ----------
    vt : VTModule
        The transformer producing ``T~``.
    sand : SANDLayer
        The smoothing layer.
    detach : bool, default=True
        Feed SAND a detached ``T~`` (the paper's training: VT learns from
        its own loss only).

    Examples
    --------
    >>> import torch
    >>> from fdaimpute.nn import SANDLayer, SANDModule, VTModule
    >>> model = SANDModule(VTModule(d_model=16, n_heads=2, encoding_dim=8),
    ...                    SANDLayer(head_dim=8, encoding_dim=8))
    >>> t = torch.rand(2, 4)
    >>> out = model(t, torch.randn(2, 4), torch.ones(2, 4, dtype=torch.bool),
    ...             torch.linspace(0, 1, 11))
    >>> sorted(out)
    ['curve', 'derivative', 'embedding', 'sand']
    """

    def __init__(self, vt, sand, detach=True):
        super().__init__()
        self.vt = vt
        self.sand = sand
        self.detach = detach

    def forward(
        self,
        t,
        y,
        mask,
        grid,
        anchors=None,
        anchor_mode="two-sided",
        return_hidden=False,
    ):
        """Run VT, then SAND; returns VT's dict plus ``sand`` and ``derivative``.

        SAND always runs in float32, outside any autocast region: it is cheap,
        and its derivative operator (a sum of many terms that cancel, scaled
        by ``gain``) and the cumulative sum lose too much in float16.
        """
        out = self.vt(t, y, mask, grid, return_hidden=return_hidden)
        rough = out["curve"].detach() if self.detach else out["curve"]
        # (the only autocast the trainer uses is CUDA's)
        with torch.autocast("cuda", enabled=False):
            out["sand"], out["derivative"] = self.sand(
                rough.float(), grid, anchors=anchors, anchor_mode=anchor_mode
            )
        return out
