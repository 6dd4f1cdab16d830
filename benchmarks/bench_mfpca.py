"""mFPCA's rank and basis choice: approximate leave-one-curve-out CV against BIC.

For each sparsity (n_i = 30, 8-12, 3-5) and each seed, draws ``--n``
subjects of :func:`fdaimpute.simulate.sand_paper` (70% fitted, 25% test),
fits ``MFPCAImputer(n_components=rule)`` for each rule (``"cv"``: Peng &
Paul's approximate leave-one-curve-out score; ``"bic"``) and PACE, and
scores the test curves against the noise-free truth on the 101-point grid
(MSE x 1000). Reported per sparsity, pooled over seeds: MSE against the
oracle's (SE over test subjects), the chosen basis size and rank, the fit
time, and for CV the paired relative difference to BIC with its SE.

With ``--loo``: how good the approximation is. On 300 subjects at 3-5
observations (210 fitted), for several basis sizes and ranks, the
approximate score's penalty ``trace(I^-1 J)`` against the optimism measured
by exact leave-one-curve-out refits (each curve's negative log-likelihood
under the parameters refitted without it, warm-started at the full fit).

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_mfpca.py --write
    OMP_NUM_THREADS=1 python benchmarks/bench_mfpca.py --loo --write
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import machine, markdown_table, write_section  # noqa: E402

import fdaimpute as fi  # noqa: E402

SPARSITY = {"30": 30, "8-12": "8-12", "3-5": "3-5"}
RULES = ("cv", "bic")


def _se(values):
    return values.std(ddof=1) / np.sqrt(values.size)


def run(n, seeds, sparsities):
    rows = []
    for label in sparsities:
        err = {name: [] for name in ("oracle", "PACE", *RULES)}
        chosen = {rule: [] for rule in RULES}
        seconds = {name: 0.0 for name in err}
        for seed in seeds:
            sim = fi.simulate.sand_paper(
                n=n, n_obs=SPARSITY[label], split=(0.7, 0.05, 0.25), random_state=seed
            )
            estimators = {
                "oracle": fi.oracle.ConditionalMean(sim.process, grid=sim.grid),
                "PACE": fi.PACEImputer(grid=sim.grid, random_state=seed),
                **{
                    rule: fi.MFPCAImputer(grid=sim.grid, n_components=rule)
                    for rule in RULES
                },
            }
            for name, est in estimators.items():
                start = time.perf_counter()
                est.fit(sim.train.data)
                seconds[name] += time.perf_counter() - start
                pred = est.transform(sim.test.data)
                err[name].append(1000 * np.mean((pred - sim.test.truth) ** 2, axis=1))
                if name in RULES:
                    chosen[name].append((est.n_basis_, est.n_components_))
            print(f"  {label} seed {seed} done", flush=True)
        err = {name: np.concatenate(values) for name, values in err.items()}
        oracle = err["oracle"].mean()
        for name, values in err.items():
            row = {
                "n_i": label,
                "method": name if name in ("oracle", "PACE") else f"mFPCA ({name})",
                "MSE": f"{values.mean():.1f} ({_se(values):.1f})",
                "MSE / oracle": f"{values.mean() / oracle:.3f}",
                "MSE / PACE": f"{values.mean() / err['PACE'].mean():.3f}",
                "fit s": f"{seconds[name] / len(seeds):.1f}",
            }
            if name in RULES:
                row["M, K per seed"] = ", ".join(f"{m}/{k}" for m, k in chosen[name])
            if name == "cv":
                diff = (err["cv"] - err["bic"]) / err["bic"].mean()
                row["CV - BIC"] = f"{100 * diff.mean():+.1f}% ({100 * _se(diff):.1f})"
            rows.append(row)
            print(rows[-1], flush=True)
    return rows


LOO_CASES = ((8, 3), (8, 5), (12, 5), (20, 4), (20, 6))


def leave_one_out(n, seed):
    """Approximate against exact leave-one-curve-out optimism."""
    from fdaimpute._mfpca import fit as mfpca_fit
    from fdaimpute._mfpca.likelihood import subject_nll
    from fdaimpute._mfpca.optimize import maximize_likelihood

    fits = {}
    approximate = mfpca_fit.approximate_cv

    def keep(stats, coef, log_lam, log_s2):
        result = approximate(stats, coef, log_lam, log_s2)
        fits[coef.shape] = (stats, coef, log_lam, log_s2, result)
        return result

    sim = fi.simulate.sand_paper(
        n=n, n_obs="3-5", split=(0.7, 0.05, 0.25), random_state=seed
    )
    mfpca_fit.approximate_cv = keep
    try:
        for m in sorted({m for m, _ in LOO_CASES}):
            fi.MFPCAImputer(n_basis=m, n_components="cv", max_components=6).fit(
                sim.train.data
            )
    finally:
        mfpca_fit.approximate_cv = approximate
    rows = []
    for m, k in LOO_CASES:
        stats, coef, log_lam, log_s2, approx = fits[(m, k)]
        total = 0.0
        for i in range(len(stats)):
            rest = maximize_likelihood(
                stats.take(np.delete(np.arange(len(stats)), i)),
                coef,
                log_lam,
                log_s2,
                max_iter=300,
                tol=1e-10,
            )
            lam, s2 = np.exp(rest.log_lam), float(np.exp(rest.log_s2))
            total += subject_nll(stats.take([i]), rest.coef, lam, s2)[0]
        rows.append(
            {
                "M": m,
                "K": k,
                "parameters": approx.n_parameters,
                "-loglik": f"{approx.nll:.1f}",
                "approximate penalty": f"{approx.penalty:.1f}",
                "exact optimism": f"{total - approx.nll:.1f}",
                "approximate score": f"{approx.score:.1f}",
                "exact score": f"{total:.1f}",
            }
        )
        print(rows[-1], flush=True)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--sparsity", nargs="+", default=list(SPARSITY))
    parser.add_argument("--loo", action="store_true")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    start = time.perf_counter()
    if args.loo:
        rows = leave_one_out(300, args.seeds[0])
        table = markdown_table(rows, list(rows[0]))
        print(table)
        body = (
            "How close is the approximate leave-one-curve-out score to the real "
            "one? The SAND paper's process, 300 subjects at 3-5 observations "
            f"(seed {args.seeds[0]}; the 210 fitted curves), the ML fit at each "
            "basis size M and rank K: the approximation's penalty "
            "`trace(I^-1 J)` against the optimism measured by refitting without "
            "each curve in turn (warm-started at the full fit) and scoring it. "
            f"Run took {(time.perf_counter() - start) / 60:.0f} min on "
            f"{machine()}.\n\n" + table
        )
        if args.write:
            write_section("mfpca-loo", "mFPCA: approximate against exact CV", body)
        return
    rows = run(args.n, args.seeds, args.sparsity)
    columns = ["n_i", "method", "MSE", "MSE / oracle", "MSE / PACE"]
    columns += ["M, K per seed", "CV - BIC", "fit s"]
    table = markdown_table(rows, columns)
    print(table)
    body = (
        f"The SAND paper's process, n = {args.n} subjects per seed and sparsity "
        f"(70% fitted, 25% test), seeds {', '.join(map(str, args.seeds))}: "
        "MFPCAImputer choosing its basis size M (8, 12, 16, 20) and rank K by "
        "Peng & Paul's approximate leave-one-curve-out score (`n_components='cv'`) "
        "or by BIC. MSE x 1000 on the 101-point grid over all test curves of all "
        "seeds (SE in brackets); 'CV - BIC': the paired difference of the test "
        "curves' MSE relative to BIC's (SE in brackets); fit s: mean per seed. "
        f"Run took {(time.perf_counter() - start) / 60:.0f} min on {machine()}.\n\n"
        + table
    )
    if args.write:
        write_section("mfpca-selection", "mFPCA: rank by approximate CV or BIC", body)


if __name__ == "__main__":
    main()
