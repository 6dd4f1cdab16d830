"""
Quick start
===========

Impute sparse curves, compare them with the truth and with the oracle (the best
linear predictor from the true covariance), and plot a few subjects.

    python examples/quickstart.py
"""

import matplotlib

matplotlib.use("Agg")

import fdaimpute as fi  # noqa: E402

sim = fi.simulate.sand_paper(n=2000, n_obs="8-12", random_state=0)
print(sim)

imputer = fi.KernelImputer(grid=sim.grid).fit(sim.train.data)
curves = imputer.transform(sim.test.data)
slopes = imputer.derivative(sim.test.data)

oracle = fi.oracle.ConditionalMean(sim.process).transform(sim.test.data)
for name, c in [("kernel", curves), ("oracle", oracle)]:
    s = fi.metrics.summarize(sim.test.truth, c)
    print(
        f"{name:>8}: MSE x1000 = {s['mse']:.1f} ± {s['mse_se']:.1f}, TV = {s['tv']:.1f}"
    )

fig = fi.plotting.plot_curves(
    sim.test.data, {"kernel": curves, "oracle": oracle}, sim.grid, truth=sim.test.truth
)
fig.savefig("quickstart.png", dpi=100)
print("saved quickstart.png")
