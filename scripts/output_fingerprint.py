"""Every imputer's output on one fixed draw, saved to compare two versions.

A refactoring that only moves code must not change a number. Run this on
both versions and compare the files::

    python scripts/output_fingerprint.py before.npz        # on the old tree
    python scripts/output_fingerprint.py after.npz         # on the new tree
    python scripts/output_fingerprint.py --compare before.npz after.npz

Same machine, same thread counts: the comparison is bit for bit.

The closed-form imputers' outputs are also summarised in
``tests/data/closed_form_fingerprint.json``, which the suite checks to a
rounding tolerance (``tests/test_fingerprint.py``). A change that means to
move their numbers rewrites it::

    python scripts/output_fingerprint.py --write-reference
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

#: Imputers whose outputs follow from the data by closed-form numerics (no
#: optimiser stopping on a tolerance, no network): they must agree across
#: machines to rounding, so the suite checks them against a stored summary.
CLOSED_FORM = ("kernel", "pace", "face", "mpace", "kernel_mv")
REFERENCE = Path(__file__).parents[1] / "tests/data/closed_form_fingerprint.json"
#: Random directions each output is projected on in the stored summary.
N_PROJECTIONS = 4


def outputs(names=None):
    """Curves, derivatives and SDs of the nine imputers (and Auto) on one draw,
    and of the imputers of several variables on a multivariate one.

    ``names`` restricts the imputers to those named (all when None).
    """
    import torch

    import fdaimpute as fi

    torch.set_num_threads(1)
    sim = fi.simulate.sand_paper(n=80, n_obs="3-5", random_state=3)
    data = sim.train.data
    small = dict(max_epochs=3, random_state=0, base=None)
    imputers = {
        "kernel": fi.KernelImputer(),
        "pace": fi.PACEImputer(random_state=0),
        "face": fi.FACEImputer(),
        "mfpca": fi.MFPCAImputer(),
        "mice": fi.MICEImputer(random_state=0),
        "gain": fi.GAINImputer(max_iter=20, random_state=0),
        "vt": fi.VTImputer(**small),
        "sand": fi.SANDImputer(**small),
        "sand_pace": fi.SANDImputer(max_epochs=3, random_state=0),
        "cnp": fi.CNPImputer(max_epochs=3, random_state=0),
    }
    out = {}
    for name, est in imputers.items():
        if names is not None and name not in names:
            continue
        est.fit(data)
        _curves_and_sd(est, data, out, name)
        try:
            out[f"{name}/derivative"] = np.asarray(est.derivative(data))
        except NotImplementedError:
            pass
    out.update(multivariate_outputs(names))
    return out


def multivariate_outputs(names=None):
    """The imputers of several variables on one multivariate draw.

    Curves, SDs, derivatives, values at the observations, and curves with
    ``keep_observed`` on a grid holding some observation times.
    """
    import fdaimpute as fi

    sim = fi.simulate.multivariate_gaussian(n=120, random_state=3)
    data = sim.train.data
    grid = np.union1d(sim.grid, data.times[::7])
    imputers = {
        "mpace": lambda **kw: fi.MultivariatePACEImputer(random_state=0, **kw),
        "kernel_mv": lambda **kw: fi.KernelImputer(**kw),
        "mice_mv": lambda **kw: fi.MICEImputer(random_state=0, **kw),
    }
    out = {}
    for name, make in imputers.items():
        if names is not None and name not in names:
            continue
        est = make().fit(data)
        _curves_and_sd(est, data, out, name)
        out[f"{name}/derivative"] = np.asarray(est.derivative(data))
        out[f"{name}/at_observations"] = est.predict_at(data).values
        kept = make(grid=grid, keep_observed=True).fit(data)
        _curves_and_sd(kept, data, out, name, prefix="kept_")
    return out


def _curves_and_sd(est, data, out, name, prefix=""):
    """Put ``est``'s curves of ``data`` (and SDs, where it has them) in ``out``."""
    try:
        curves, sd = est.transform(data, return_std=True)
        out[f"{name}/{prefix}sd"] = np.asarray(sd)
    except NotImplementedError:
        curves = est.transform(data)
    out[f"{name}/{prefix}curves"] = np.asarray(curves)


def summary(arrays):
    """Shape and projections on fixed random directions of each array: a few
    numbers per output that move whenever the output does."""
    out = {}
    for key in sorted(arrays):
        values = np.asarray(arrays[key], dtype=float)
        rng = np.random.default_rng(sum(key.encode()))
        directions = rng.standard_normal((N_PROJECTIONS, values.size))
        out[key] = {
            "shape": list(values.shape),
            "norm": float(np.linalg.norm(values)),
            "projections": (directions @ values.ravel()).tolist(),
        }
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="*")
    parser.add_argument("--compare", action="store_true")
    parser.add_argument(
        "--write-reference",
        action="store_true",
        help=f"rewrite {REFERENCE.name} from the closed-form imputers' outputs",
    )
    args = parser.parse_args(argv)
    if args.write_reference:
        text = json.dumps(summary(outputs(CLOSED_FORM)), indent=1)
        REFERENCE.write_text(text + "\n")
        return 0
    if not args.files:
        parser.error("name an output file, or two with --compare")
    if not args.compare:
        np.savez(args.files[0], **outputs())
        return 0
    a, b = (np.load(f) for f in args.files)
    differ = [
        k
        for k in sorted(set(a) | set(b))
        if k not in a or k not in b or not np.array_equal(a[k], b[k], equal_nan=True)
    ]
    for k in sorted(set(a) & set(b)):
        print(f"{k:20s} {'identical' if k not in differ else 'DIFFERS'}")
    for k in differ:
        if k not in a or k not in b:
            print(f"{k:20s} only in one file")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
