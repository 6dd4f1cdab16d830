"""Neural training across processes: epoch time and MSE for 1 and 2 processes.

Each configuration is launched with ``torchrun --standalone`` (gloo on CPUs,
one thread per process; on a GPU the backend named) on the SAND paper's
process; the fit is the same in each (same data, seed and global batch), the
processes share each batch. Rank ``r`` takes GPU ``r`` modulo the GPUs there
are, so two processes can share one GPU (NCCL refuses two ranks on one GPU;
gloo reduces CUDA tensors too). Prints a markdown table; ``--write`` puts it
in docs/benchmarks.md.

Usage::

    python benchmarks/bench_distributed.py --n 2000 --epochs 10 --write
    python benchmarks/bench_distributed.py --device cuda --backend nccl gloo
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
    device, backend = sys.argv[5], sys.argv[6]
    torch.set_num_threads(1)
    if device == "cuda":
        local = int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count()
        torch.cuda.set_device(local)
        device = f"cuda:{local}"
    if "WORLD_SIZE" in os.environ:
        torch.distributed.init_process_group(backend)
    rank = torch.distributed.get_rank() if "WORLD_SIZE" in os.environ else 0
    sim = fi.simulate.sand_paper(n=n, n_obs="8-12", random_state=0)
    fit = fi.IrregularData.concat([sim.train.data, sim.validation.data])
    est = getattr(fi, cls)(base=None, max_epochs=epochs, random_state=0, device=device)
    start = time.perf_counter()
    est.fit(fit)
    seconds = time.perf_counter() - start
    if rank == 0:
        mse = fi.metrics.mse(sim.test.truth, est.transform(sim.test.data))
        epoch = float(np.median(est.history_["seconds"]))
        row = dict(epoch_s=epoch, fit_s=seconds, mse=mse, device=str(est.device_))
        with open(out, "w") as fh:
            json.dump(row, fh)
    """
)


def run(cls, processes, n, epochs, workdir, device="cpu", backend="gloo", logs=None):
    """One launch; the row rank 0 wrote (or the error, if the launch failed).

    With ``logs`` (a folder), the launch's output is kept there.
    """
    script = Path(workdir) / "worker.py"
    script.write_text(WORKER)
    out = Path(workdir) / f"{cls}-{processes}.json"
    launch = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    launch += [f"--nproc_per_node={processes}"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    args = [str(script), str(out), cls, str(n), str(epochs), device, backend]
    done = subprocess.run(
        [*launch, *args], env=env, capture_output=True, text=True, timeout=900
    )
    if logs:
        Path(logs).mkdir(parents=True, exist_ok=True)
        name = f"{cls}-{backend}-{processes}.log"
        (Path(logs) / name).write_text(done.stdout + done.stderr)
    if done.returncode:
        # the first rank's own exception, not the launcher's summary of it
        lines = [
            line
            for line in done.stderr.splitlines()
            if ("Error" in line or "error" in line) and "elastic" not in line
        ]
        return {"error": (lines or done.stderr.splitlines() or ["?"])[0][:300]}
    return json.loads(out.read_text())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--backend", nargs="+", default=["gloo"])
    parser.add_argument("--methods", nargs="+", default=["VTImputer", "SANDImputer"])
    parser.add_argument("--log-dir", help="keep each launch's output here")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        for backend in args.backend:
            for cls in args.methods:
                base = None
                for p in args.processes:
                    row = run(
                        cls,
                        p,
                        args.n,
                        args.epochs,
                        workdir,
                        args.device,
                        backend,
                        args.log_dir,
                    )
                    rows.append(_row(cls, p, backend, row, base))
                    if "error" not in row:
                        base = base or row
                    print(rows[-1], flush=True)
    columns = ["method", "backend", "processes", "epoch s", "speed-up", "fit s"]
    columns += ["MSE x1000", "device", "error"]
    table = markdown_table(rows, columns)
    print(table)
    if args.write and args.device == "cuda":
        import torch

        body = (
            f"The SAND paper's process, {args.n:,} subjects with 8–12 observations, "
            f"`preset='cpu'`, {args.epochs} epochs, launched with `torchrun "
            "--standalone --nproc_per_node=P` on a machine with "
            f"{torch.cuda.device_count()} GPU(s): rank r takes GPU r modulo their "
            "number, so with P = 2 both processes share one GPU. `error`: why a "
            "launch failed. Compare within the run only.\n\n" + table + "\n"
        )
        write_section("distributed-gpu", "Neural training across processes (GPU)", body)
    elif args.write:
        body = (
            f"The SAND paper's process, {args.n:,} subjects with 8–12 observations "
            f"(80/10/10 split; the imputers fit on 90%), `preset='cpu'`, "
            f"{args.epochs} epochs, launched with `torchrun --standalone "
            "--nproc_per_node=P` (gloo, one thread per process). `epoch s`: the "
            "median epoch time, `speed-up` against one process; MSE on the test "
            "subjects against the true curves. The global batch (64) and the "
            "learning rate are the same for every P: the processes share each "
            "batch. The machine has 2 cores and was shared: compare within the "
            "run only.\n\n" + table + "\n"
        )
        write_section("distributed", "Neural training across processes", body)


def _row(cls, processes, backend, row, base):
    """A table row of one launch (its error instead, if it failed)."""
    out = {"method": cls, "backend": backend, "processes": processes}
    if "error" in row:
        return {**out, "error": row["error"]}
    return {
        **out,
        "epoch s": f"{row['epoch_s']:.2f}",
        "speed-up": f"{(base or row)['epoch_s'] / row['epoch_s']:.2f}",
        "fit s": f"{row['fit_s']:.0f}",
        "MSE x1000": f"{1000 * row['mse']:.1f}",
        "device": row.get("device", ""),
    }


if __name__ == "__main__":
    main()
