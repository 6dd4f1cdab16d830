"""Where a VT or SAND training epoch spends its time (torch profiler).

For each variant asked for (preset x batch size x mixed precision), trains one
warm-up epoch, times the next epochs without the profiler, then profiles one
more on the SAND paper's process. Prints, per variant, the epoch time, the
optimizer steps and kernel launches per epoch, and how busy the device was
(the sum of the kernels' times over the wall time of the profiled epoch: far
below 100% means the host cannot launch work fast enough), then the share of
the profiled time taken by each group of operators (matrix products,
attention kernels, activations, normalisation, optimizer, copies between
host and device, the rest) and the top operators of the first variant.
Validation is off, so only training steps are profiled.

``--cpu-path`` tries two ways to speed up the CPU's steps that the trainer
does not offer, by patching it for the run: ``bf16`` runs the forward pass
under bfloat16 autocast on the CPU, ``compile`` trains a ``torch.compile``
(dynamic shapes) of the module; its first (warm-up) epoch carries the
compilation.

Examples
--------
::

    python benchmarks/profile_training.py --n 2000 --sparsity 30
    python benchmarks/profile_training.py --n 10000 --sparsity 8-12 \\
        --threads 2 --amp off --cpu-path eager bf16 compile
    python benchmarks/profile_training.py --device cuda --n 10000 \\
        --sparsity 8-12 --preset cpu paper --amp off bfloat16 float16
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import machine, markdown_table, write_section  # noqa: E402

import fdaimpute as fi  # noqa: E402
from fdaimpute.neural import PRESETS, SANDImputer, VTImputer  # noqa: E402
from fdaimpute.nn import Trainer  # noqa: E402

# operator names (CPU rows) and kernel names (device rows) of each group
GROUPS = {
    "matrix products": ("aten::mm", "aten::addmm", "aten::bmm", "gemm", "cutlass"),
    "attention kernels": ("scaled_dot_product", "flash", "efficient_att", "fmha"),
    "activations": ("gelu", "relu"),
    "normalisation": ("layer_norm",),
    "optimizer": ("Optimizer.", "adam", "multi_tensor"),
    "host-device copies": ("memcpy", "aten::_to_copy", "aten::copy_"),
}
_AMP_TYPES = ("bfloat16", "float16")


def group_of(name):
    low = name.lower()
    for group, keys in GROUPS.items():
        if any(key.lower() in low for key in keys):
            return group
    return "other"


def _variant(args, preset, batch, amp, graph):
    cls = SANDImputer if args.model == "sand" else VTImputer
    params = dict(
        preset=preset,
        base=None,
        max_epochs=1,
        validation_fraction=0.0,
        device=args.device,
        amp=amp,
        cuda_graph=graph,
        random_state=0,
    )
    if batch:
        params["batch_size"] = batch
    return cls(**params)


@contextlib.contextmanager
def cpu_path(name):
    """Patch the trainer for one of ``--cpu-path``'s variants while in the block."""
    forward, configure = Trainer.forward, Trainer.configure

    def autocast_forward(self, batch, return_hidden=False):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return forward(self, batch, return_hidden)

    def compiled_configure(self, n_train):
        graph = configure(self, n_train)
        self.model = torch.compile(self.module, dynamic=True)
        return graph

    if name == "bf16":
        Trainer.forward = autocast_forward
    elif name == "compile":
        Trainer.configure = compiled_configure
    try:
        yield
    finally:
        Trainer.forward, Trainer.configure = forward, configure


def profile_variant(args, data, preset, batch, amp, graph=False, path="eager"):
    """Epoch time, launches and device busy share of one variant."""
    cuda = args.device.startswith("cuda")
    with cpu_path(path):
        est = _variant(args, preset, batch, amp, graph).fit(data)  # warm-up epoch
        warm_up_s = est.history_["seconds"][0]
        est.set_params(warm_start=True, max_epochs=args.epochs)
        est.fit(data)
        epoch_s = float(np.median(est.history_["seconds"][1:]))
        est.set_params(max_epochs=1)
        activities = [ProfilerActivity.CPU]
        if cuda:
            activities.append(ProfilerActivity.CUDA)
        start = time.perf_counter()
        with profile(activities=activities) as prof:
            est.fit(data)
            if cuda:
                torch.cuda.synchronize()
        wall = time.perf_counter() - start
    events = [e for e in prof.key_averages() if not e.key.startswith("ProfilerStep")]
    launches = sum(
        e.count for e in events if e.key.startswith(("cudaLaunch", "cuLaunch"))
    )
    if cuda:
        # kernels appear as rows of their own; count each once
        kernels = [e for e in events if e.device_type == DeviceType.CUDA]
        ops = [e for e in events if e.device_type != DeviceType.CUDA]
        kernel_time = sum(e.self_device_time_total for e in kernels)
        op_time = sum(e.self_device_time_total for e in ops)
        events = ops if op_time > 0 else kernels
        busy = max(kernel_time, op_time) / 1e6

    def self_time(e):
        return e.self_device_time_total if cuda else e.self_cpu_time_total

    total = sum(self_time(e) for e in events) or 1.0
    shares = {}
    for e in events:
        group = group_of(e.key)
        shares[group] = shares.get(group, 0.0) + self_time(e)
    batch = est.config_["batch_size"]
    steps = -(-len(data) // batch)
    row = {
        "preset": preset,
        "batch": batch,
        "amp": str(amp),
        "graph": "yes" if graph else "no",
        "cpu path": path,
        "warm-up s": warm_up_s,
        "s / epoch": epoch_s,
        "steps": steps,
        "ms / step": 1000 * epoch_s / steps,
        "launches / step": launches / steps if cuda else "",
        "device busy": f"{100 * busy / wall:.0f}%" if cuda else "",
        "profiled s": wall,
    }
    for group, t in shares.items():
        row[group] = f"{100 * t / total:.1f}%"
    top = sorted(events, key=self_time, reverse=True)[: args.top]
    top_rows = [
        {
            "operator": e.key[:60],
            "calls": e.count,
            "share": f"{100 * self_time(e) / total:.1f}%",
        }
        for e in top
    ]
    return row, top_rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=["sand", "vt"], default="sand")
    parser.add_argument("--n", type=int, default=2000, help="subjects simulated")
    parser.add_argument("--sparsity", default="30", help="30, 8-12 or 3-5")
    parser.add_argument("--preset", nargs="+", default=["cpu"], choices=list(PRESETS))
    parser.add_argument(
        "--batch-size", nargs="+", type=int, default=[0], help="0: the preset's"
    )
    parser.add_argument(
        "--amp", nargs="+", default=["auto"], choices=["auto", "off", *_AMP_TYPES]
    )
    parser.add_argument(
        "--cuda-graph", nargs="+", default=["off"], choices=["off", "on"]
    )
    parser.add_argument(
        "--cpu-path",
        nargs="+",
        default=["eager"],
        choices=["eager", "bf16", "compile"],
        help="patch the trainer: bfloat16 autocast on the CPU, or torch.compile",
    )
    parser.add_argument("--epochs", type=int, default=3, help="timed epochs")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--save", help="also write the rows to this JSON file")
    parser.add_argument(
        "--load", nargs="+", help="skip profiling: table the rows of saved runs"
    )
    parser.add_argument(
        "--write",
        action="store_true",
        help="with --load: replace the gpu-profile section of docs/benchmarks.md",
    )
    args = parser.parse_args(argv)
    if args.load:
        return table_saved(args)
    torch.set_num_threads(args.threads)

    n_obs = int(args.sparsity) if args.sparsity.isdigit() else args.sparsity
    sim = fi.simulate.sand_paper(n=args.n, n_obs=n_obs, random_state=0)
    data = sim.train.data
    print(machine())
    print(
        f"{args.model.upper()}, n_i={args.sparsity}, {len(data)} subjects, "
        f"device {args.device}",
        flush=True,
    )
    rows, tops = [], []
    variants = itertools.product(
        args.preset, args.batch_size, args.amp, args.cuda_graph, args.cpu_path
    )
    for preset, batch, amp, graph, path in variants:
        amp_value = False if amp == "off" else amp
        row, top = profile_variant(
            args, data, preset, batch, amp_value, graph == "on", path
        )
        rows.append(row)
        tops.append(top)
        print(json.dumps(row), flush=True)
    print()
    print(variants_table(rows))
    print()
    print(
        f"Top operators ({rows[0]['preset']}, batch {rows[0]['batch']}, "
        f"amp {rows[0]['amp']}):"
    )
    print(markdown_table(tops[0], ["operator", "calls", "share"]))
    if args.save:
        Path(args.save).write_text(
            json.dumps({"machine": machine(), "rows": rows, "top": tops})
        )


def variants_table(rows):
    """The markdown table of profiled variants."""
    groups = [g for g in [*GROUPS, "other"] if any(g in r for r in rows)]
    columns = ["preset", "batch", "amp", "graph"]
    if any(r.get("cpu path", "eager") != "eager" for r in rows):
        columns += ["cpu path", "warm-up s"]
    columns += ["s / epoch", "steps", "ms / step"]
    columns += ["launches / step", "device busy", *groups]
    formats = {
        "s / epoch": ".2f",
        "ms / step": ".1f",
        "launches / step": ".0f",
        "warm-up s": ".1f",
    }
    return markdown_table(rows, columns, formats)


def table_saved(args):
    """Print (and with ``--write`` document) the variants of saved runs."""
    rows, machines = [], set()
    for path in args.load:
        saved = json.loads(Path(path).read_text())
        rows.extend(dict(row, graph=row.get("graph", "no")) for row in saved["rows"])
        machines.add(saved["machine"])
    table = variants_table(rows)
    print(table)
    if args.write:
        body = (
            "One SAND training epoch on the SAND paper's process (n = 2,000, "
            "8-12 observations, 1,800 training subjects), per variant: preset, "
            "batch size, mixed precision (`amp`) and whether the step ran from a "
            "CUDA graph. `s / epoch` is the median of three epochs without the "
            "profiler; `launches / step` counts kernel launches from the host "
            "under the profiler; `device busy` is the kernels' time over the "
            "profiled epoch's wall time; the group columns share out the "
            "device's time. With a graph, the profiled epoch is a fresh fit's "
            "(its three eager warm-up steps and the capture included), so its "
            "launches and busy share are mostly the warm-up's; its `ms / step` "
            "(from the timed epochs) is the replayed steps'. Saved rows: "
            "`benchmarks/results/gpu/profile*.json`."
            f"\n\n{table}\n"
        )
        measured_on = machines.pop() if len(machines) == 1 else None
        write_section(
            "gpu-profile", "Where a training step's time goes (GPU)", body, measured_on
        )
    return rows


if __name__ == "__main__":
    main()
