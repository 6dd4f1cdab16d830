"""The vanilla transformer imputer (VT): observed points in, a curve on a grid out.

Encoder tokens are the observations ``[y, t, enc(t)]`` (padded, with a mask);
decoder queries are the grid points ``[s, enc(s)]``. The decoder attends to
itself and to the encoder, and a linear head reads one value per grid point.
All attention goes through
:func:`torch.nn.functional.scaled_dot_product_attention`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from fdaimpute.nn.channels import channel_gate, module_inputs
from fdaimpute.nn.encoding import SinusoidalEncoding
from fdaimpute.nn.norms import NORMS, make_norm, takes_mask
from fdaimpute.nn.output import ModuleOutput

__all__ = ["Attention", "DecoderLayer", "EncoderLayer", "VTModule"]

_ACTIVATIONS = {"gelu": nn.GELU, "relu": nn.ReLU}


class Attention(nn.Module):
    """Multi-head softmax attention over a key-padding mask.

    Parameters
    ----------
    d_model : int
        Width of the queries, keys and values.
    n_heads : int
        Number of heads; must divide ``d_model``.
    dropout : float, default=0.0
        Dropout on the attention weights (training only).
    """

    def __init__(self, d_model, n_heads, dropout=0.0):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(
                f"d_model ({d_model}) must be divisible by n_heads ({n_heads})"
            )
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        self.dropout = float(dropout)
        self.q_proj = nn.Linear(d_model, d_model)
        self.kv_proj = nn.Linear(d_model, 2 * d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def _heads(self, x):
        b, n, _ = x.shape
        return x.view(b, n, self.n_heads, self.head_dim).transpose(1, 2)

    def forward(self, x, memory=None, key_mask=None):
        """Attend from ``x`` (B, Lq, d) to ``memory`` (B, Lk, d), default ``x``.

        ``key_mask`` (B, Lk) is True where a key may be attended to. ``x``
        may have batch size 1 and is then shared by every row of ``memory``.
        """
        memory = x if memory is None else memory
        q = self._heads(self.q_proj(x))
        k, v = (self._heads(z) for z in self.kv_proj(memory).chunk(2, dim=-1))
        if q.shape[0] != k.shape[0]:
            q = q.expand(k.shape[0], -1, -1, -1)
        mask = None if key_mask is None else key_mask[:, None, None, :]
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=self.dropout if self.training else 0.0
        )
        b, h, n, e = out.shape
        return self.out_proj(out.transpose(1, 2).reshape(b, n, h * e))


def _feed_forward(d_model, dim_feedforward, activation, dropout):
    return nn.Sequential(
        nn.Linear(d_model, dim_feedforward),
        _ACTIVATIONS[activation](),
        nn.Dropout(dropout),
        nn.Linear(dim_feedforward, d_model),
    )


def _apply_norm(layer, x, mask):
    """``layer(x)``, passing the mask of real tokens to layers that take one."""
    return layer(x, mask) if takes_mask(layer) else layer(x)


class _Block(nn.Module):
    """A residual sub-layer: pre-norm ``x + f(N(x))`` or post-norm ``N(x + f(x))``.

    ``mask`` (B, L), True for real tokens, reaches the normalisation ``N``
    (batch normalisation's statistics skip padding); None: all are real.
    """

    def __init__(self, d_model, dropout, norm_first, norm="layer"):
        super().__init__()
        self.norm = make_norm(norm, d_model)
        self.drop = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x, f, mask=None):
        if self.norm_first:
            return x + self.drop(f(_apply_norm(self.norm, x, mask)))
        return _apply_norm(self.norm, x + self.drop(f(x)), mask)


class EncoderLayer(nn.Module):
    """Self-attention among the observed points, then a feed-forward block."""

    def __init__(
        self,
        d_model,
        n_heads,
        dim_feedforward,
        dropout,
        activation,
        norm_first,
        norm="layer",
    ):
        super().__init__()
        self.self_attn = Attention(d_model, n_heads, dropout)
        self.ff = _feed_forward(d_model, dim_feedforward, activation, dropout)
        self.block1 = _Block(d_model, dropout, norm_first, norm)
        self.block2 = _Block(d_model, dropout, norm_first, norm)

    def forward(self, x, key_mask):
        x = self.block1(x, lambda h: self.self_attn(h, key_mask=key_mask), key_mask)
        return self.block2(x, self.ff, key_mask)


class DecoderLayer(nn.Module):
    """Self-attention among grid queries, cross-attention to the observations, FF."""

    def __init__(
        self,
        d_model,
        n_heads,
        dim_feedforward,
        dropout,
        activation,
        norm_first,
        norm="layer",
    ):
        super().__init__()
        self.self_attn = Attention(d_model, n_heads, dropout)
        self.cross_attn = Attention(d_model, n_heads, dropout)
        self.ff = _feed_forward(d_model, dim_feedforward, activation, dropout)
        self.block1 = _Block(d_model, dropout, norm_first, norm)
        self.block2 = _Block(d_model, dropout, norm_first, norm)
        self.block3 = _Block(d_model, dropout, norm_first, norm)

    def forward(self, x, memory, key_mask):
        x = self.block1(x, self.self_attn)
        x = self.block2(x, lambda h: self.cross_attn(h, memory, key_mask))
        return self.block3(x, self.ff)


class VTModule(nn.Module):
    """Transformer encoder-decoder mapping observed points to a curve on a grid.

    Parameters
    ----------
    d_model : int, default=64
        Width of tokens and queries.
    n_heads : int, default=4
        Attention heads.
    encoder_layers, decoder_layers : int, default=2
        Depths.
    dim_feedforward : int, default=128
        Hidden width of the feed-forward blocks.
    dropout : float, default=0.0
        Dropout in attention, feed-forward and residual branches.
    encoding_dim : int, default=32
        Features of the sinusoidal time encoding (even).
    encoding_scale : float, default=100.0
        ``M - 1`` for the paper's ``M``-point grid on [0, 1]; see
        :func:`~fdaimpute.nn.sinusoidal_encoding`.
    activation : {"gelu", "relu"}, default="gelu"
        Feed-forward activation.
    norm_first : bool, default=True
        Pre-norm layers (stable without warm-up); ``False`` gives the
        post-norm layers of the released code.
    norm : {"layer", "batch", "rms", None}, default="layer"
        The normalisation in every residual block and after each pre-norm
        stack: :class:`torch.nn.LayerNorm`, batch normalisation over the
        real tokens (:class:`~fdaimpute.nn.norms.MaskedBatchNorm`), RMS
        normalisation, or none (a pre-norm stack without normalisation may
        need a lower learning rate).
    base_gate : bool, default=False
        Add the ``base_gate`` parameter (starting at 0) that mixes the
        network's curve with a statistical base's; needed to use a base
        (:attr:`base_curves` or ``forward(base=...)``). A scalar, or with
        several variables one weight per variable.
    n_variables : int, default=1
        Variables ``p`` per subject. With several, every observation's
        token adds its variable's learnt embedding, the decoder asks for
        every variable's curve (the grid's queries plus that variable's
        query embedding), and the curve is ``p * M`` values, variable-major
        (see :mod:`fdaimpute.nn.channels`); ``forward`` then needs each
        observation's variable. One variable adds no parameters.
    n_covariates : int, default=0
        Subject covariates ``c`` (numeric, standardised). With some, a
        linear map of a subject's covariates is one more encoder token,
        always visible: every observation and every grid query can attend
        to it. ``forward`` then needs each subject's covariates.

    Attributes
    ----------
    base_curves : callable or None
        The statistical base the network corrects (None: none), e.g. an
        :class:`~fdaimpute.nn.base_curves.EstimatorBase`: called as
        ``base_curves(t, y, mask, grid)`` on what the encoder sees (with
        ``variable=`` each observation's variable when there are several),
        it returns the base's curve and derivative on the grid
        (standardised).
        The output is then ``base + g * (network - base)`` with ``g`` the
        ``base_gate`` parameter: the base itself while ``g = 0``. It is not
        part of the state dict: set it again after loading weights.

    Notes
    -----
    The first decoder layer's self-attention sees the same grid queries for
    every subject, so it is computed once per forward pass and shared (except
    when training with dropout, where each subject needs its own masks); the
    result is identical to computing it per subject.

    With ``norm="batch"`` the encoder's statistics are over the tokens the
    mask lets through: padding, and in training the points hidden from the
    encoder (whose values must not leak into the visible tokens through
    the statistics), are left out. The decoder's are over all ``B x M``
    grid queries; while the first layer shares its queries, the
    statistics of the ``M`` shared ones are exactly those of their ``B``
    copies, so sharing changes nothing in training or in the running
    statistics that eval mode uses.

    Examples
    --------
    >>> import torch
    >>> from fdaimpute.nn import VTModule
    >>> vt = VTModule(d_model=16, n_heads=2, dim_feedforward=32, encoding_dim=8)
    >>> t = torch.rand(3, 5).sort(dim=1).values
    >>> out = vt(t, torch.randn(3, 5), torch.ones(3, 5, dtype=torch.bool),
    ...          torch.linspace(0, 1, 11))
    >>> out["curve"].shape
    torch.Size([3, 11])
    """

    base_curves = None
    #: Whether the mix's gradient reaches the gate only (not the network).
    mix_detached = False

    def __init__(
        self,
        d_model=64,
        n_heads=4,
        encoder_layers=2,
        decoder_layers=2,
        dim_feedforward=128,
        dropout=0.0,
        encoding_dim=32,
        encoding_scale=100.0,
        activation="gelu",
        norm_first=True,
        norm="layer",
        base_gate=False,
        n_variables=1,
        n_covariates=0,
    ):
        super().__init__()
        if int(n_variables) < 1:
            raise ValueError(f"n_variables must be >= 1, got {n_variables!r}")
        if int(n_covariates) < 0:
            raise ValueError(f"n_covariates must be >= 0, got {n_covariates!r}")
        self.n_variables = int(n_variables)
        self.n_covariates = int(n_covariates)
        if activation not in _ACTIVATIONS:
            raise ValueError(
                f"activation must be one of {sorted(_ACTIVATIONS)}, got {activation!r}"
            )
        if norm not in NORMS:
            raise ValueError(f"norm must be one of {NORMS}, got {norm!r}")
        if decoder_layers < 1:
            raise ValueError("decoder_layers must be >= 1")
        self.dropout = float(dropout)
        self.encoding = SinusoidalEncoding(encoding_dim, encoding_scale)
        self.token_proj = nn.Linear(2 + encoding_dim, d_model)
        self.query_proj = nn.Linear(1 + encoding_dim, d_model)
        args = (
            d_model,
            n_heads,
            dim_feedforward,
            dropout,
            activation,
            norm_first,
            norm,
        )
        self.encoder = nn.ModuleList(EncoderLayer(*args) for _ in range(encoder_layers))
        self.decoder = nn.ModuleList(DecoderLayer(*args) for _ in range(decoder_layers))
        # pre-norm stacks need a last normalisation; post-norm layers end in one
        final = norm if norm_first else None
        self.encoder_norm = make_norm(final, d_model)
        self.decoder_norm = make_norm(final, d_model)
        self.head = nn.Linear(d_model, 1)
        if base_gate:
            shape = () if self.n_variables == 1 else (self.n_variables,)
            self.base_gate = nn.Parameter(torch.zeros(shape))
        if self.n_variables > 1:
            self.variable_tokens = nn.Embedding(self.n_variables, d_model)
            self.variable_queries = nn.Embedding(self.n_variables, d_model)
            for table in (self.variable_tokens, self.variable_queries):
                nn.init.normal_(table.weight, std=d_model**-0.5)
        if self.n_covariates:
            self.covariate_token = nn.Linear(self.n_covariates, d_model)

    def embed(self, t, y, variable=None):
        """Encoder tokens ``[y, t, enc(t)]`` projected to ``d_model``: (B, L, d).

        With several variables, each token adds its variable's embedding.
        """
        feats = torch.cat([y.unsqueeze(-1), t.unsqueeze(-1), self.encoding(t)], dim=-1)
        tokens = self.token_proj(feats)
        if self.n_variables == 1:
            return tokens
        if variable is None:
            raise ValueError(
                f"a module of {self.n_variables} variables needs each "
                "observation's variable"
            )
        return tokens + self.variable_tokens(variable)

    def encode(self, t, y, mask, variable=None, covariates=None):
        """The encoder's output tokens of the observations: (B, L, d).

        Parameters
        ----------
        t, y, mask : Tensor of shape (B, L)
            As for :meth:`forward`.
        variable : long Tensor of shape (B, L), default=None
            Each observation's variable (needed with several).
        covariates : Tensor of shape (B, c), default=None
            Each subject's covariates (needed with ``n_covariates``).

        Returns
        -------
        Tensor of shape (B, L, d)
            One token per observation, after the encoder's last
            normalisation; tokens that ``mask`` leaves out are padding.
            (The covariates' token is read by the observations' tokens, and
            not returned.)
        """
        tokens, memory_mask = self._with_covariates(
            self.embed(t, y, variable), mask, covariates
        )
        return self._encode(tokens, memory_mask)[:, : t.shape[1]]

    def _with_covariates(self, tokens, mask, covariates):
        """The encoder's tokens and mask, with the covariates' token last."""
        if not self.n_covariates:
            if covariates is not None:
                raise ValueError("covariates given to a module built without them")
            return tokens, mask
        if covariates is None or covariates.shape[-1] != self.n_covariates:
            got = None if covariates is None else tuple(covariates.shape)
            raise ValueError(
                f"a module of {self.n_covariates} covariates needs each subject's "
                f"covariates, shape (B, {self.n_covariates}); got {got}"
            )
        token = self.covariate_token(covariates.to(tokens.dtype)).unsqueeze(1)
        seen = torch.ones_like(mask[:, :1])
        return torch.cat([tokens, token], 1), torch.cat([mask, seen], 1)

    def _encode(self, x, mask, hidden=None):
        """The encoder stack on tokens ``x``; layer outputs go into ``hidden``."""
        for i, layer in enumerate(self.encoder):
            x = layer(x, mask)
            if hidden is not None:
                hidden[f"encoder.{i}"] = x
        return _apply_norm(self.encoder_norm, x, mask)

    def queries(self, grid):
        """Decoder queries ``[s, enc(s)]`` projected to ``d_model``: (1, p * M, d).

        With several variables, each variable's copy of the grid's queries
        adds that variable's query embedding (variable-major).
        """
        feats = torch.cat([grid.unsqueeze(-1), self.encoding(grid)], dim=-1)
        q = self.query_proj(feats)
        if self.n_variables > 1:
            q = (q.unsqueeze(0) + self.variable_queries.weight.unsqueeze(1)).flatten(
                0, 1
            )
        return q.unsqueeze(0)

    def parameter_groups(self):
        """The parameters in one list (SAND's module has two groups)."""
        return [list(self.parameters())]

    def forward(
        self,
        t,
        y,
        mask,
        grid,
        return_hidden=False,
        *,
        anchors=None,
        base=None,
        variable=None,
        covariates=None,
    ):
        """Impute curves on ``grid`` from the observations the mask lets through.

        Parameters
        ----------
        t, y : Tensor of shape (B, L)
            Observation times (mapped to [0, 1]) and standardised values,
            padded arbitrarily beyond each subject's length.
        mask : bool Tensor of shape (B, L)
            True for the observations the encoder may see; every row needs
            at least one.
        grid : Tensor of shape (M,)
            Output grid on the same time scale.
        return_hidden : bool, default=False
            Also return every layer's output (for regularizers).
        anchors : None
            Ignored: VT has no integration constant. Accepted so that a VT
            and a :class:`~fdaimpute.nn.SANDModule` take the same call.
        base : tuple of two Tensors of shape (B, M), default=None
            The base's curve and derivative (or None), when the caller has
            them already; otherwise :attr:`base_curves` gives them (if set).
        variable : long Tensor of shape (B, L), default=None
            Each observation's variable (needed with several; padding may
            hold any valid index).
        covariates : Tensor of shape (B, c), default=None
            Each subject's covariates (needed with ``n_covariates``).

        Returns
        -------
        ModuleOutput
            ``curve`` (B, M), or (B, p * M) variable-major with several
            variables: the imputation T~ on the grid; ``embedding``
            (B, L, d): the encoder's input tokens; ``hidden``: a dict of
            layer outputs named ``encoder.<i>`` (B, L, d; the covariates'
            token last with ``n_covariates``) and ``decoder.<i>``
            (B, M, d) (only with ``return_hidden``); ``network``: with a
            base, the network's own curve (before the gate); ``sand`` and
            ``derivative`` are None.
        """
        if base is None and self.base_curves is not None:
            extra = module_inputs(self.n_variables, variable, covariates)
            base = self.base_curves(t, y, mask, grid, **extra)
        if base is not None and not hasattr(self, "base_gate"):
            raise ValueError("a base needs a module built with base_gate=True")
        batch = t.shape[0]
        emb = self.embed(t, y, variable)
        tokens, mask = self._with_covariates(emb, mask, covariates)
        hidden = {}
        if not self.training and bool(mask.all()):
            # inference batches are sorted by length, so most have no padding;
            # attention without a mask takes PyTorch's faster kernels
            mask = None
        memory = self._encode(tokens, mask, hidden if return_hidden else None)
        q = self.queries(grid)
        if self.training and self.dropout > 0:
            # each subject needs its own dropout masks
            q = q.expand(batch, -1, -1)
        for i, layer in enumerate(self.decoder):
            q = layer(q, memory, mask)
            if return_hidden:
                hidden[f"decoder.{i}"] = q
        curve = self.head(self.decoder_norm(q)).squeeze(-1)
        hidden = hidden if return_hidden else None
        if base is None:
            return ModuleOutput(curve, emb, hidden=hidden)
        if base[0].shape != curve.shape:
            raise ValueError(
                f"the base's curves have shape {tuple(base[0].shape)}, the "
                f"network's {tuple(curve.shape)} (one curve per variable)"
            )
        gate = channel_gate(self.base_gate, grid.shape[0])
        own = curve.detach() if self.mix_detached else curve
        mixed = base[0] + gate * (own - base[0])
        return ModuleOutput(mixed, emb, hidden=hidden, network=ModuleOutput(curve, emb))
