"""Every imputer's output on one fixed draw, saved to compare two versions.

A refactoring that only moves code must not change a number. Run this on
both versions and compare the files::

    python scripts/output_fingerprint.py before.npz        # on the old tree
    python scripts/output_fingerprint.py after.npz         # on the new tree
    python scripts/output_fingerprint.py --compare before.npz after.npz

Same machine, same thread counts: the comparison is bit for bit.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np


def outputs():
    """Curves, derivatives and SDs of the nine imputers (and Auto) on one draw,
    and of the imputers of several variables on a multivariate one."""
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
        est.fit(data)
        _curves_and_sd(est, data, out, name)
        try:
            out[f"{name}/derivative"] = np.asarray(est.derivative(data))
        except NotImplementedError:
            pass
    out.update(multivariate_outputs())
    return out


def multivariate_outputs():
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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="+")
    parser.add_argument("--compare", action="store_true")
    args = parser.parse_args(argv)
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
