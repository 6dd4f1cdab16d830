"""
A neural imputer on top of PACE, and its training history
=========================================================

``SANDImputer()`` starts from PACE (its default ``base="pace"``): the untrained
network *is* PACE; training teaches the network its own curve and a weight that
mixes it into PACE's, and the fit keeps the network only if it beats PACE on
held-out subjects (by a standard error, and for most of them). Tiny settings
here, to run in seconds: real fits train for minutes (see the benchmarks). Five
epochs on 400 subjects do not beat PACE, so this fit returns PACE's curves
(best epoch -1, weight 0).
"""

import fdaimpute as fi

sim = fi.simulate.sand_paper(n=400, n_obs="8-12", random_state=0)
sand = fi.SANDImputer(max_epochs=5, d_model=16, random_state=0, device="cpu")
sand.fit(sim.train.data)
pace = fi.PACEImputer(grid=sim.grid, random_state=0).fit(sim.train.data)
for name, imputer in [("PACE", pace), ("SAND on PACE", sand)]:
    mse = fi.metrics.mse(sim.test.truth, imputer.transform(sim.test.data))
    print(f"{name:>12}: MSE {mse:.4f}")
print("best epoch:", sand.best_epoch_, "(-1: the base was kept)")
print("weight of the network's curve:", sand.base_weight_)

fig = fi.plotting.plot_history(sand)
