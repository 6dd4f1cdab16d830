"""Neural training across processes: torchrun with the gloo backend, on CPU."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
from numpy.testing import assert_allclose, assert_array_equal

import fdaimpute as fi
from fdaimpute.persistence import load

pytestmark = pytest.mark.skipif(
    not (torch.distributed.is_available() and torch.distributed.is_gloo_available()),
    reason="torch.distributed with gloo is not available",
)

# Every rank fits the same tiny networks on the same data, saves their weights,
# and rank 0 saves the models; with one process and no launcher it does the
# same without a process group. One launch fits several (class, base) jobs in
# turn, each into its own folder: a launch costs seconds before any fit. The
# error model is cross-fitted (48 training subjects) except with the PACE
# base, whose five more fits per rank would double the job's time: the jobs
# without a base cover cross-fitting.
WORKER = textwrap.dedent(
    """
    import os, sys
    import numpy as np, torch
    import fdaimpute as fi

    out, jobs = sys.argv[1], sys.argv[2:]
    sim = fi.simulate.sand_paper(n=60, n_obs="8-12", random_state=0)
    launched = "WORLD_SIZE" in os.environ
    if launched:
        torch.distributed.init_process_group("gloo")
    rank = torch.distributed.get_rank() if launched else 0
    for job in jobs:
        cls, base = job.split("-")
        est = getattr(fi, cls)(
            base=None if base == "none" else base,
            d_model=8, n_heads=2, encoder_layers=1, decoder_layers=1,
            dim_feedforward=16, encoding_dim=8, max_epochs=2, batch_size=16,
            validation_fraction=0.2, random_state=0, device="cpu",
            calibration_folds="auto" if base == "none" else None,
        )
        est.fit(sim.train.data)
        folder = f"{out}/{job}"
        os.makedirs(folder, exist_ok=True)
        state = {k: v.detach().clone() for k, v in est.module_.state_dict().items()}
        torch.save(state, f"{folder}/weights{rank}.pt")
        np.save(f"{folder}/curves{rank}.npy", est.transform(sim.test.data))
        if rank == 0:
            est.save(f"{folder}/model.fdai")
    if launched:
        torch.distributed.destroy_process_group()
    """
)

# The jobs of each launch: processes (0: no launcher) -> (class, base) pairs.
JOBS = {
    2: [("VTImputer", "none"), ("SANDImputer", "none"), ("SANDImputer", "pace")],
    1: [("SANDImputer", "none")],
    0: [("SANDImputer", "none"), ("VTImputer", "none")],
}


def _run(tmp_path, processes):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    if processes:
        launch = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
        launch += [f"--nproc_per_node={processes}"]
    else:
        launch = [sys.executable]
    jobs = [f"{cls}-{base}" for cls, base in JOBS[processes]]
    env = {"OMP_NUM_THREADS": "1", **os.environ}
    done = subprocess.run(
        [*launch, str(script), str(tmp_path), *jobs],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.fixture(scope="module")
def launched(tmp_path_factory):
    """``launched(cls, processes, base)``: the folder of that worker job.

    Each launch (one per number of processes, all its jobs) runs once per
    module; tests only read its files.
    """
    runs = {}

    def run(cls, processes, base="none"):
        assert (cls, base) in JOBS[processes]
        if processes not in runs:
            path = tmp_path_factory.mktemp(f"launch-{processes}")
            _run(path, processes)
            runs[processes] = path
        return runs[processes] / f"{cls}-{base}"

    return run


def _weights(path):
    return torch.load(path, weights_only=True)


@pytest.mark.parametrize(
    "cls, base",
    [("VTImputer", "none"), ("SANDImputer", "none"), ("SANDImputer", "pace")],
)
def test_two_processes_train_one_model(launched, cls, base):
    out = launched(cls, processes=2, base=base)
    first, second = _weights(out / "weights0.pt"), _weights(out / "weights1.pt")
    assert first.keys() == second.keys()
    for name in first:
        assert_array_equal(first[name].numpy(), second[name].numpy(), err_msg=name)
    # the model rank 0 saved loads in a plain process and imputes the same
    model = load(out / "model.fdai")
    assert not any(k.startswith("module.") for k in model.module_.state_dict())
    sim = fi.simulate.sand_paper(n=60, n_obs="8-12", random_state=0)
    assert_allclose(model.transform(sim.test.data), np.load(out / "curves1.npy"))


def test_one_process_under_torchrun_equals_no_launcher(launched):
    alone = launched("SANDImputer", processes=0)
    under_torchrun = launched("SANDImputer", processes=1)
    assert_array_equal(
        np.load(alone / "curves0.npy"), np.load(under_torchrun / "curves0.npy")
    )


def test_two_processes_differ_from_one_only_by_the_batch_split(launched):
    # not a copy of one process's fit: the ranks shared the batches
    one = launched("VTImputer", processes=0)
    two = launched("VTImputer", processes=2)
    a, b = np.load(one / "curves0.npy"), np.load(two / "curves0.npy")
    assert not np.array_equal(a, b)
    assert np.abs(a - b).max() < 0.5 * np.abs(a).max()


WEIGHT_WORKER = textwrap.dedent(
    """
    import sys
    import torch
    from fdaimpute.nn.distributed import observation_weight

    torch.distributed.init_process_group("gloo")
    rank = torch.distributed.get_rank()
    count = (1, 3)[rank]  # rank 0 averages over 1 observation, rank 1 over 3
    weight = observation_weight(count, torch.device("cpu"), 2)
    with open(f"{sys.argv[1]}/weight{rank}.txt", "w") as f:
        f.write(repr(weight))
    torch.distributed.destroy_process_group()
    """
)


def test_ranks_losses_weighted_by_their_observations(tmp_path):
    # mean of the weighted per-rank means = the mean over all four points
    script = tmp_path / "weights.py"
    script.write_text(WEIGHT_WORKER)
    launch = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    done = subprocess.run(
        [*launch, "--nproc_per_node=2", str(script), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    weights = [float((tmp_path / f"weight{r}.txt").read_text()) for r in (0, 1)]
    assert weights == [0.5, 1.5]
    # rank means 4.0 (one point) and 8.0 (three): pooled mean (4 + 24) / 4 = 7
    assert (weights[0] * 4.0 + weights[1] * 8.0) / 2 == 7.0
    from fdaimpute.nn.distributed import observation_weight

    assert observation_weight(5, torch.device("cpu"), 1) == 1.0


def test_cli_fit_under_torchrun_reports_once_and_saves_a_model(tmp_path):
    sim = fi.simulate.sand_paper(n=60, n_obs="8-12", random_state=0)
    path = tmp_path / "obs.csv"
    sim.train.data.to_long().to_csv(path, index=False)
    model = tmp_path / "vt.fdai"
    launch = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    fit = ["-m", "fdaimpute", "fit", str(path), "--method", "vt", "--epochs", "2"]
    # cross-fitting and the PACE base (both covered by the worker launches)
    # would take most of the time
    fit += ["--param", "calibration_folds=null", "--param", "base=null"]
    done = subprocess.run(
        [*launch, "--nproc_per_node=2", *fit, "--save", str(model)],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr.count("Read IrregularData") == 1, done.stderr[-3000:]
    curves = fi.VTImputer.load(model).transform(sim.train.data)
    assert curves.shape == (len(sim.train.data), 101)
    assert np.isfinite(curves).all()
