"""Where a VT or SAND training epoch spends its time (torch profiler).

Trains one warm-up epoch, then profiles the next on the SAND paper's process
and prints the share of the profiled time taken by each group of operators
(matrix products, attention kernels, activations, normalisation, optimizer,
the rest), and the top operators. Validation is off, so only training steps
are profiled.

Examples
--------
::

    python benchmarks/profile_training.py --n 2000 --sparsity 30
    python benchmarks/profile_training.py --device cuda --preset paper
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import machine, markdown_table  # noqa: E402

import fdaimpute as fi  # noqa: E402
from fdaimpute.neural import SANDImputer, VTImputer  # noqa: E402

GROUPS = {
    "matrix products": ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"),
    "attention kernels": ("scaled_dot_product", "_flash_attention", "_efficient_att"),
    "activations": ("gelu", "relu"),
    "normalisation": ("layer_norm",),
    "optimizer": ("Optimizer.", "adam"),
}


def group_of(name):
    low = name.lower()
    for group, keys in GROUPS.items():
        if any(key.lower() in low for key in keys):
            return group
    return "other"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=["sand", "vt"], default="sand")
    parser.add_argument("--n", type=int, default=2000, help="subjects simulated")
    parser.add_argument("--sparsity", default="30", help="30, 8-12 or 3-5")
    parser.add_argument("--preset", default="cpu", choices=["cpu", "paper"])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    cuda = args.device.startswith("cuda")

    n_obs = int(args.sparsity) if args.sparsity.isdigit() else args.sparsity
    sim = fi.simulate.sand_paper(n=args.n, n_obs=n_obs, random_state=0)
    cls = SANDImputer if args.model == "sand" else VTImputer
    est = cls(
        preset=args.preset,
        base=None,
        max_epochs=1,
        validation_fraction=0.0,
        device=args.device,
        random_state=0,
    ).fit(sim.train.data)
    est.set_params(warm_start=True)
    activities = [ProfilerActivity.CPU]
    if cuda:
        activities.append(ProfilerActivity.CUDA)
    start = time.perf_counter()
    with profile(activities=activities) as prof:
        est.fit(sim.train.data)
        if cuda:
            torch.cuda.synchronize()
    wall = time.perf_counter() - start

    events = [e for e in prof.key_averages() if not e.key.startswith("ProfilerStep")]

    def self_time(e):
        return e.self_device_time_total if cuda else e.self_cpu_time_total

    total = sum(self_time(e) for e in events) or 1.0
    shares = {}
    for e in events:
        group = group_of(e.key)
        shares[group] = shares.get(group, 0.0) + self_time(e)
    print(machine())
    print(
        f"{cls.__name__}, preset={args.preset}, n_i={args.sparsity}, "
        f"{len(sim.train.data)} subjects, device {args.device}: one epoch "
        f"{wall:.2f} s under the profiler ({'device' if cuda else 'CPU'} time)"
    )
    rows = [
        {"operator group": g, "share": f"{100 * t / total:.1f}%"}
        for g, t in sorted(shares.items(), key=lambda kv: -kv[1])
    ]
    print(markdown_table(rows, ["operator group", "share"]))
    top = sorted(events, key=self_time, reverse=True)[: args.top]
    rows = [
        {
            "operator": e.key[:60],
            "calls": e.count,
            "share": f"{100 * self_time(e) / total:.1f}%",
        }
        for e in top
    ]
    print(markdown_table(rows, ["operator", "calls", "share"]))


if __name__ == "__main__":
    main()
