"""SAND: self-attention on derivatives, and the VT + SAND module.

SAND turns a rough curve ``T~`` on a grid into a smooth one: a softmax-free
attention layer (``Diff``) maps ``[T~ - T~_1, enc(s)]`` to a derivative
``D~`` on the grid, and the curve is ``T~_1 + Intg(D~)``. The integration
and interpolation functions live in :mod:`fdaimpute.nn.integration` and are
importable from here too.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from fdaimpute.nn.encoding import SinusoidalEncoding
from fdaimpute.nn.integration import (
    ANCHORS,
    cumulative_integral,
    integrate,
    interpolate_c1,
    interpolate_linear,
    mean_anchored_integral,
    two_sided_integral,
)
from fdaimpute.nn.sand_module import SANDModule

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
