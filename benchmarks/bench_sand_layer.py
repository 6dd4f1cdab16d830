"""The SAND layer alone: how fast each variant learns to smooth a rough curve.

SAND is trained as a smoother of a given rough curve: the input is a
simulated curve of the paper's process (standardised) plus white noise on the
grid, the targets are noisy observations at a random 30% of the grid points,
and the score is the MSE of SAND's curve against the noise-free curve on
held-out curves, after a number of Adam steps. The integration constant is
fitted to the input over the whole grid (``anchors="mean"``), so the noise of
the input's first value does not blur the comparison of derivatives.

Variants, each adding one change to the paper's literal layer:

- ``paper``: encoding ``scale = M - 1``, ``base = 1e4``; raw features; the
  curve in queries, keys and values.
- ``+ wide encoding``: ``scale = pi (M - 1) / 2``, ``base = 100``.
- ``+ whitening``: features replaced by an orthonormal basis of their span.
- ``+ positional scores``: queries and keys from the features only.
- ``+ identity start``: weights solved in closed form so that the layer
  starts by passing its input through its smooth span
  (:meth:`~fdaimpute.nn.SANDLayer.init_identity`; the estimators' layer).

The span columns show, for each encoding, its effective number of
directions on the grid and the share of the simulated curves' energy outside
its span (a floor on any SAND output built from it).

Example::

    python benchmarks/bench_sand_layer.py --write
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import markdown_table, write_section  # noqa: E402

import fdaimpute as fi  # noqa: E402
from fdaimpute.nn import SANDLayer  # noqa: E402

VARIANTS = {
    "paper": dict(wide=False, whiten=False, curve_in_scores=True),
    "+ wide encoding": dict(wide=True, whiten=False, curve_in_scores=True),
    "+ whitening": dict(wide=True, whiten=True, curve_in_scores=True),
    "+ positional scores": dict(wide=True, whiten=True, curve_in_scores=False),
    "+ identity start": dict(
        wide=True, whiten=True, curve_in_scores=False, identity_start=True
    ),
}


def make_layer(grid, wide, whiten, curve_in_scores, identity_start=False):
    m = grid.shape[0]
    scale, base = (math.pi * (m - 1) / 2, 100.0) if wide else (float(m - 1), 1e4)
    layer = SANDLayer(
        encoding_scale=scale,
        encoding_base=base,
        whiten=whiten,
        curve_in_scores=curve_in_scores,
    )
    return layer.init_identity(grid) if identity_start else layer


def span_report(layer, grid, curves):
    """Effective directions of the raw encoding and energy outside its span."""
    raw = layer.encoding(grid.double())
    evals = torch.linalg.eigvalsh(raw.T @ raw / raw.shape[0])
    effective = float((evals / (evals + 1e-4 * evals.max())).sum())
    u, s, _ = torch.linalg.svd(raw, full_matrices=False)
    basis = u[:, s > 1e-4 * s[0]]
    # the output is c_1 + integral: constants are always in the span
    basis = torch.linalg.qr(torch.cat([torch.ones_like(basis[:, :1]), basis], 1))[0]
    resid = curves - (curves @ basis) @ basis.T
    return effective, float(resid.pow(2).sum() / curves.pow(2).sum())


def run(variant, args, truth, grid):
    torch.manual_seed(args.seed)
    layer = make_layer(grid, **VARIANTS[variant])
    opt = torch.optim.Adam(layer.parameters(), lr=args.lr)
    gen = torch.Generator().manual_seed(args.seed)
    train, test = truth[: -args.n_test], truth[-args.n_test :]
    test_in = test + args.input_noise * torch.randn(test.shape, generator=gen)
    anchors = torch.ones_like(test)

    def score():
        with torch.no_grad():
            out, _ = layer(test_in, grid, anchors=anchors, anchor_mode="mean")
        return float((out - test).pow(2).mean())

    scores, start = {0: score()}, time.perf_counter()
    for step in range(1, max(args.steps) + 1):
        idx = torch.randint(0, train.shape[0], (args.batch_size,), generator=gen)
        x = train[idx]
        rough = x + args.input_noise * torch.randn(x.shape, generator=gen)
        y = x + args.obs_noise * torch.randn(x.shape, generator=gen)
        seen = torch.rand(x.shape, generator=gen) < args.observed
        out, _ = layer(rough, grid, anchors=torch.ones_like(x), anchor_mode="mean")
        loss = (out - y).pow(2)[seen].mean()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(layer.parameters(), 1.0)
        opt.step()
        if step in args.steps:
            scores[step] = score()
    seconds = time.perf_counter() - start
    return layer, scores, seconds, float((test_in - test).pow(2).mean())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=3000, help="simulated curves")
    parser.add_argument("--n-test", type=int, default=500)
    parser.add_argument("--steps", type=int, nargs="+", default=[600, 3000])
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--input-noise", type=float, default=0.2)
    parser.add_argument("--obs-noise", type=float, default=0.25)
    parser.add_argument("--observed", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    sim = fi.simulate.sand_paper(n=args.n, n_obs=30, random_state=args.seed)
    truth = np.vstack([sim.train.truth, sim.validation.truth, sim.test.truth])
    truth = torch.as_tensor(truth / truth.std(), dtype=torch.float32)
    grid = torch.linspace(0, 1, truth.shape[1])

    rows = []
    for variant in VARIANTS:
        layer, scores, seconds, input_mse = run(variant, args, truth, grid)
        effective, outside = span_report(layer, grid, truth.double())
        row = {
            "variant": variant,
            "effective directions": f"{effective:.0f}",
            "energy outside span": f"{100 * outside:.2f}%",
            "input MSE": f"{input_mse:.4f}",
        }
        for step, value in scores.items():
            label = f"MSE after {step} steps" if step else "MSE at start"
            row[label] = f"{value:.4f}"
        row["seconds"] = f"{seconds:.1f}"
        rows.append(row)
        print(row, flush=True)
    columns = list(rows[0])
    table = markdown_table(rows, columns)
    print(table)
    if args.write:
        body = (
            f"The SAND layer alone, as a smoother: input = a standardised curve "
            f"of the paper's process plus white noise (SD {args.input_noise}) on "
            f"the {truth.shape[1]}-point grid; trained on noisy observations "
            f"(SD {args.obs_noise}) at a random {args.observed:.0%} of the grid "
            f"points; scored by the MSE against the noise-free curves of "
            f"{args.n_test} held-out curves (standardised scale). Adam at "
            f"lr {args.lr:g}, batches of {args.batch_size}, gradient clipping "
            f"at 1, integration constant fitted over the grid "
            f"(`anchors='mean'`), seed {args.seed}. Each row adds one change "
            f"to the one above; the last is the layer the estimators use.\n\n"
            f"{table}\n"
        )
        write_section("sand-layer", "The SAND layer alone", body)


if __name__ == "__main__":
    main()
