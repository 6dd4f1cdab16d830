"""Two non-linearly coupled variables: what a linear method reaches, what is left.

``fi.simulate.nonlinear_coupling``: ``x0`` is a Gaussian path ``Z`` (three
harmonics) observed 8-12 times per subject; ``x1`` mixes ``Z`` (share
``linear_weight``) with its centred square and is observed 2-4 times; SNR 4
each. For each seed and training size, fits on the training subjects and
scores 1,000 more against the noise-free curves on the 101-point grid, per
variable, as ratios to the multivariate linear oracle (the best linear
predictor given every observation of both variables, with the true second
moments):

- ``posterior``: the best predictor of all, ``E[X(t) | all observations]``
  (``fi.oracle.posterior_mean``: the path drawn from its exact posterior
  given ``x0``, weighted by ``x1``'s likelihood): the floor that a method
  which learns the coupling, such as a network, can approach;
- ``multi``: MultivariatePACEImputer with its defaults (a linear predictor
  fitted to the data: its limit is the linear oracle);
- ``uni``: PACEImputer on the variable alone;
- with ``--networks``: SANDImputer and VTImputer on both variables (one
  network, each observation's variable in its token, one curve per
  variable), ``sand`` and ``vt`` with their defaults (multivariate PACE as
  their base, kept per variable where the network does not beat it;
  ``*_g``: the network's weight on each variable, 0 where the base was
  kept), ``sand-alone`` and ``vt-alone`` trained alone (``base=None``).

Issue 35's target for multichannel SAND here is 0.85 x the linear oracle
at 10,000 training subjects.

Usage::

    python benchmarks/bench_coupled.py                   # print the tables
    python benchmarks/bench_coupled.py --n 2000 10000 --write
    python benchmarks/bench_coupled.py --networks --n 2000 --save-rows rows.json
    python benchmarks/bench_coupled.py --networks sand-alone --n 10000 --seeds 0
    python benchmarks/bench_coupled.py --load-rows a.json b.json --write

(rows of the same draw from several files are merged: each run adds its
networks' columns.)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import markdown_table, mean_and_error, write_section  # noqa: E402

import fdaimpute as fi  # noqa: E402
from fdaimpute.mpace import MultivariatePACEImputer  # noqa: E402

N_DRAWS = 4000  # per test subject, for the posterior mean


NETWORKS = {
    "sand": (fi.SANDImputer, {}),
    "vt": (fi.VTImputer, {}),
    "sand-alone": (fi.SANDImputer, {"base": None}),
    "vt-alone": (fi.VTImputer, {"base": None}),
}


def run_seed(seed, n_train, n_test, weight, networks=None, fit_params=None):
    """Per-variable MSEs of the methods for one draw.

    ``fit_params`` (``device``, ``max_time``) go to every network.
    """
    n = n_train + n_test
    sim = fi.simulate.nonlinear_coupling(
        n=n,
        linear_weight=weight,
        split=(n_train / n, 0.0, n_test / n),
        random_state=seed,
    )
    test, truth = sim.test.data, sim.test.truth
    oracle = fi.oracle.MultivariateConditionalMean(sim.process, grid=sim.grid)
    linear = oracle.transform(test).reshape(truth.shape)
    best = fi.oracle.posterior_mean(
        sim.process, test, sim.grid, n_draws=N_DRAWS, random_state=seed
    ).reshape(truth.shape)
    start = time.perf_counter()
    imp = MultivariatePACEImputer(random_state=seed).fit(sim.train.data)
    fit_s = time.perf_counter() - start
    multi = imp.transform_3d(test, grid=sim.grid)
    nets, net_s, gates, bands = {}, {}, {}, {}
    for name in networks or ():
        cls, params = NETWORKS[name]
        start = time.perf_counter()
        net = cls(random_state=seed, **params, **(fit_params or {}))
        net.fit(sim.train.data)
        net_s[name] = time.perf_counter() - start
        curves, sd = net.transform(test, grid=sim.grid, return_std=True)
        nets[name] = curves.reshape(truth.shape)
        bands[name] = sd.reshape(truth.shape)
        if net.base_weight_ is not None:
            gates[name] = net.base_weight_
        print(
            f"  {name}: {net.n_epochs_} epochs (best {net.best_epoch_}, "
            f"stop {net.stop_reason_}) in {net_s[name]:.0f} s on {net.device_}",
            flush=True,
        )
    rows = []
    for j, name in enumerate(imp.variables_):
        part, who = test.variable_data(j)
        if who.size != len(test):  # never with these sparsities
            raise RuntimeError("a test subject lacks a variable")
        uni = imp.univariate_[j].transform(part, grid=sim.grid)

        def mse(curves, j=j):
            return float(np.mean((curves - truth[:, j]) ** 2))

        rows.append(
            dict(
                n=n_train,
                weight=weight,
                seed=seed,
                variable=name,
                n_obs=f"{part.n_obs.min()}-{part.n_obs.max()}",
                linear=mse(linear[:, j]),
                posterior=mse(best[:, j]),
                multi=mse(multi[:, j]),
                uni=mse(uni),
                K=imp.n_components_,
                fit_s=fit_s,
                **{name: mse(curves[:, j]) for name, curves in nets.items()},
                **{f"{name}_s": s for name, s in net_s.items()},
                **{f"{name}_g": float(g[j]) for name, g in gates.items()},
                **{
                    f"{name}_cover": float(
                        np.mean(
                            np.abs(nets[name][:, j] - truth[:, j])
                            <= 1.96 * bands[name][:, j]
                        )
                    )
                    for name in bands
                },
            )
        )
    return rows


#: What the section says of the networks' columns (where there are some).
NETWORKS_TEXT = (
    "; `sand`, `vt`: SANDImputer and VTImputer on both variables (one network, "
    "one curve per variable) with their defaults: multivariate PACE as their "
    "base, kept on a variable where the network does not beat it on held-out "
    "subjects (`*_g`: the network's weight on the variable, 0 where the base "
    "was kept); `sand-alone`, `vt-alone`: the same networks trained alone "
    "(`base=None`); `*_s`: their fit seconds (rows of several runs are merged: "
    "compare seconds within a run, the machine's load differed); `*_cover` "
    "(where measured): the share of the test subjects' true curves on the grid "
    "inside the network's 95% band (`return_std=True`, ±1.96 SD)"
)


def merge_rows(rows):
    """Rows of the same draw and variable (from several runs) as one row.

    The runs score the same draws, so what they share is equal; each adds
    its networks' columns.
    """
    merged = {}
    for row in rows:
        key = (row["n"], row["weight"], row["seed"], row["variable"])
        merged.setdefault(key, {}).update(row)
    return list(merged.values())


def summarise(rows):
    """Mean ratios to the linear oracle (± standard error over the seeds)."""
    out = []
    keys = dict.fromkeys((r["n"], r["weight"], r["variable"]) for r in rows)
    for n, weight, name in keys:
        mine = [
            r for r in rows if (r["n"], r["weight"], r["variable"]) == (n, weight, name)
        ]
        summary = dict(
            n=n,
            weight=weight,
            variable=name,
            n_obs=mine[0]["n_obs"],
            linear_mse=np.mean([r["linear"] for r in mine]),
        )
        for key in ("posterior", "multi", "uni", *NETWORKS):
            if any(key not in r for r in mine):
                continue
            ratio = [r[key] / r["linear"] for r in mine]
            summary[f"{key}_ratio"] = mean_and_error(ratio, 3)
        out.append(summary)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--n", type=int, nargs="+", default=[2000])
    parser.add_argument("--n-test", type=int, default=1000)
    parser.add_argument(
        "--weights", type=float, nargs="+", default=[0.5], help="linear_weight"
    )
    parser.add_argument("--write", action="store_true")
    parser.add_argument(
        "--networks",
        nargs="*",
        choices=list(NETWORKS),
        help="also these networks on both variables (no name: both)",
    )
    parser.add_argument("--device", help="the networks' device (default: theirs)")
    parser.add_argument(
        "--max-time", type=float, help="seconds of epochs per network fit"
    )
    parser.add_argument("--save-rows", help="write the per-seed rows to this JSON")
    parser.add_argument("--load-rows", nargs="+", help="table saved rows instead")
    parser.add_argument("--section", default="multivariate-nonlinear")
    parser.add_argument(
        "--title",
        default="Non-linearly coupled variables: linear methods and the floor",
    )
    args = parser.parse_args()
    networks = None if args.networks is None else args.networks or list(NETWORKS)
    fit_params = {
        k: v for k, v in (("device", args.device), ("max_time", args.max_time)) if v
    }
    saved = [json.loads(Path(path).read_text()) for path in args.load_rows or ()]
    rows = merge_rows(row for part in saved for row in part)
    for n in args.n if not args.load_rows else ():
        for weight in args.weights:
            for seed in args.seeds:
                rows += run_seed(seed, n, args.n_test, weight, networks, fit_params)
                print(f"n {n} weight {weight} seed {seed} done", flush=True)
                if args.save_rows:
                    Path(args.save_rows).write_text(json.dumps(rows, indent=1))
    nets = [k for k in NETWORKS if any(k in r for r in rows)]
    gates = [f"{k}_g" for k in nets if any(f"{k}_g" in r for r in rows)]
    covers = [f"{k}_cover" for k in nets if any(f"{k}_cover" in r for r in rows)]
    summary = markdown_table(
        summarise(rows),
        ["n", "weight", "variable", "n_obs", "linear_mse"]
        + ["posterior_ratio", "multi_ratio", "uni_ratio"]
        + [f"{k}_ratio" for k in nets],
        {"linear_mse": ".4g"},
    )
    per_seed = markdown_table(
        rows,
        ["n", "weight", "seed", "variable", "n_obs", "linear", "posterior"]
        + ["multi", "uni", *nets, "K", "fit_s", *(f"{k}_s" for k in nets)]
        + gates
        + covers,
        {c: ".4g" for c in ("linear", "posterior", "multi", "uni", *nets)}
        | {c: ".0f" for c in (f"{k}_s" for k in nets)}
        | {c: ".2f" for c in gates + covers}
        | {"fit_s": ".1f"},
    )
    print(summary)
    print()
    print(per_seed)
    if args.write:
        body = (
            "Two variables coupled through a square "
            "(`fi.simulate.nonlinear_coupling`: `x0` a Gaussian path Z of three "
            "harmonics, observed 8-12 times; `x1` = `weight` x Z + "
            "sqrt(1 - weight^2) x its centred square, scaled by 4, observed "
            f"2-4 times; SNR 4), `n` training subjects, {args.n_test} test "
            f"subjects, seeds {sorted({r['seed'] for r in rows})} (per size: the "
            "per-seed table). MSE on the 101-point grid against "
            "the noise-free curves, as ratios to the multivariate linear "
            "oracle (`linear`: the best linear predictor given both variables' "
            "observations, true second moments), mean ± standard error over "
            "the seeds. `posterior`: the best predictor of all, "
            "E[X(t) | all observations] (`fi.oracle.posterior_mean`, "
            f"{N_DRAWS} draws per subject), the floor a model that learns the "
            "coupling can approach; `multi`: MultivariatePACEImputer's "
            "defaults; `uni`: PACEImputer on the variable alone"
            f"{NETWORKS_TEXT if nets else ''}. "
            "Issue 35's target for multichannel SAND is 0.85 x the linear "
            f"oracle at 10,000 training subjects.\n\n{summary}\n\nPer seed "
            "(`fit_s`: the multivariate fit, univariate fits included, "
            f"seconds):\n\n{per_seed}\n"
        )
        write_section(args.section, args.title, body)


if __name__ == "__main__":
    main()
