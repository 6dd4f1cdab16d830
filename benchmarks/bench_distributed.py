"""Neural training across processes: epoch time and MSE for 1 and 2 processes.

Each configuration is launched with ``torchrun --standalone`` (gloo on CPUs,
one thread per process) on the SAND paper's process; the fit is the same in
each (same data, seed and global batch), the processes share each batch.
Prints a markdown table; ``--write`` puts it in docs/benchmarks.md.

Usage::

    python benchmarks/bench_distributed.py --n 2000 --epochs 10 --write
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import markdown_table, write_section  # noqa: E402

WORKER = textwrap.dedent(
    """
    import json, os, sys, time
    import numpy as np, torch
    import fdaimpute as fi

    out, cls, n, epochs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    torch.set_num_threads(1)
    if "WORLD_SIZE" in os.environ:
        torch.distributed.init_process_group("gloo")
    rank = torch.distributed.get_rank() if "WORLD_SIZE" in os.environ else 0
    sim = fi.simulate.sand_paper(n=n, n_obs="8-12", random_state=0)
    fit = fi.IrregularData.concat([sim.train.data, sim.validation.data])
    est = getattr(fi, cls)(base=None, max_epochs=epochs, random_state=0, device="cpu")
    start = time.perf_counter()
    est.fit(fit)
    seconds = time.perf_counter() - start
    if rank == 0:
        mse = fi.metrics.mse(sim.test.truth, est.transform(sim.test.data))
        epoch = float(np.median(est.history_["seconds"]))
        row = {"epoch_s": epoch, "fit_s": seconds, "mse": mse}
        with open(out, "w") as fh:
            json.dump(row, fh)
    """
)


def run(cls, processes, n, epochs, workdir):
    """One launch; the row rank 0 wrote."""
    script = Path(workdir) / "worker.py"
    script.write_text(WORKER)
    out = Path(workdir) / f"{cls}-{processes}.json"
    launch = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    launch += [f"--nproc_per_node={processes}"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    args = [str(script), str(out), cls, str(n), str(epochs)]
    subprocess.run([*launch, *args], check=True, env=env, capture_output=True)
    return json.loads(out.read_text())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        for cls in ("VTImputer", "SANDImputer"):
            base = None
            for p in args.processes:
                row = run(cls, p, args.n, args.epochs, workdir)
                base = base or row
                rows.append(
                    {
                        "method": cls,
                        "processes": p,
                        "epoch s": f"{row['epoch_s']:.2f}",
                        "speed-up": f"{base['epoch_s'] / row['epoch_s']:.2f}",
                        "fit s": f"{row['fit_s']:.0f}",
                        "MSE x1000": f"{1000 * row['mse']:.1f}",
                    }
                )
                print(rows[-1], flush=True)
    columns = ["method", "processes", "epoch s", "speed-up", "fit s", "MSE x1000"]
    table = markdown_table(rows, columns)
    print(table)
    if args.write:
        body = (
            f"The SAND paper's process, {args.n:,} subjects with 8–12 observations "
            f"(80/10/10 split; the imputers fit on 90%), `preset='cpu'`, "
            f"{args.epochs} epochs, launched with `torchrun --standalone "
            "--nproc_per_node=P` (gloo, one thread per process). `epoch s`: the "
            "median epoch time, `speed-up` against one process; MSE on the test "
            "subjects against the true curves. The global batch (64) and the "
            "learning rate are the same for every P: the processes share each "
            "batch. The machine has 2 cores and was shared: compare within the "
            "run only. No GPU was available, so neither NCCL nor several GPUs "
            "were measured.\n\n" + table + "\n"
        )
        write_section("distributed", "Neural training across processes", body)


if __name__ == "__main__":
    main()
