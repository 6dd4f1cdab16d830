"""
A neural imputer on top of PACE, and its training history
=========================================================

``SANDImputer(base="pace")`` learns a correction to PACE's curves. The
untrained network *is* PACE; training keeps a correction only if it beats PACE
on held-out subjects by a standard error. Tiny settings here, to run in seconds:
real fits train for minutes (see the benchmarks). With 400 subjects the test
rests on a few dozen held-out subjects and can let through a correction that is
worse on new ones, as it does in this run: on small data PACE alone is the
safer choice.
"""

import fdaimpute as fi

sim = fi.simulate.sand_paper(n=400, n_obs="8-12", random_state=0)
sand = fi.SANDImputer(
    base="pace", max_epochs=5, d_model=16, random_state=0, device="cpu"
).fit(sim.train.data)
pace = fi.PACEImputer(grid=sim.grid, random_state=0).fit(sim.train.data)
for name, imputer in [("PACE", pace), ("SAND + PACE base", sand)]:
    mse = fi.metrics.mse(sim.test.truth, imputer.transform(sim.test.data))
    print(f"{name:>16}: MSE {mse:.4f}")
print("best epoch:", sand.best_epoch_, "(-1: the base was kept)")

fig = fi.plotting.plot_history(sand)
