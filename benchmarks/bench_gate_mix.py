"""What the base's mix loses: per epoch, the base, the network and the mix.

Fits SAND's default (PACE as the base) once and, after every epoch, scores
on the selection subjects' hidden points (the ones that choose the epoch):
the base alone (the mix's weight set to 0), the network's own curve, the
mix at its trained weight ``g``, and the mix at the weight that would have
been best there (least squares, clipped to [0, 1]). Then it scores on the
held-out test values the imputer as fitted, the base, and two states kept
during training: the epoch with the best mix at its best weight (with that
weight), and the epoch where the network alone was best (network alone).

Data: ``uk N SPLIT`` (UK electricity at 30 readings, ``N`` households of
bench_realdata's split ``SPLIT``, its held-out readings as the test), or
``warp N`` (``fi.simulate.time_warping`` at 8-12 points, ``N`` subjects as
in bench_nonlinear, its test subjects against the noise-free curves).

Prints every fifth epoch and the test errors, and their ratios to the
base's; ``--save`` writes the records as JSON. Training is patched (the
trainer's ``validate``) to read out the extra scores; the fit itself is not
changed.

Examples
--------
::

    python benchmarks/bench_gate_mix.py uk 3500 0
    python benchmarks/bench_gate_mix.py warp 3000 --seed 2
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_nonlinear import simulate  # noqa: E402
from bench_realdata import DATASETS, held_out_split, squared_errors  # noqa: E402

import fdaimpute as fi  # noqa: E402
from fdaimpute._neural.base import _NeuralImputer  # noqa: E402
from fdaimpute.nn import Trainer  # noqa: E402
from fdaimpute.nn.training import BASE_WEIGHTS  # noqa: E402
from fdaimpute.nn.validation import _held_out_batches  # noqa: E402


def _errors(trainer, data, hidden, read):
    """Prediction less value at the hidden points, in a fixed order."""
    batches = _held_out_batches(
        trainer.forward,
        data,
        hidden,
        trainer.grid,
        trainer.anchors,
        trainer.batch_size,
        read,
    )
    return torch.cat([err[held] for _, held, err, _ in batches]).double()


def _output_gate(module):
    """The weight of the curve the imputer returns (SAND's own, or VT's)."""
    return dict(module.named_parameters())["base_gate"]


def best_weight(base_errors, network_errors):
    """The weight in [0, 1] with the lowest squared error of the mix, and that error."""
    diff = network_errors - base_errors
    denom = float((diff * diff).sum())
    g = 0.0 if denom == 0 else float(-(base_errors * diff).sum() / denom)
    g = min(max(g, 0.0), 1.0)
    return g, float(((base_errors + g * diff) ** 2).mean())


class Recorder:
    """Patches :meth:`Trainer.validate` to record each epoch's scores and state."""

    def __init__(self):
        self.records, self.states = [], []
        self._validate = Trainer.validate

    def __enter__(self):
        recorder = self

        def validate(trainer, data, hidden):
            loss = recorder._validate(trainer, data, hidden)
            recorder.record(trainer, data, hidden)
            return loss

        Trainer.validate = validate
        return self

    def __exit__(self, *exc):
        Trainer.validate = self._validate

    @torch.no_grad()
    def record(self, trainer, data, hidden):
        module = trainer.module
        module.eval()
        # score the mix itself even while a held-out weight's network trains
        network_only, trainer.network_only = trainer.network_only, False
        mix = _errors(trainer, data, hidden, trainer.read)
        network = _errors(
            trainer, data, hidden, lambda out, batch: trainer.read(out.network, batch)
        )
        gate = _output_gate(module)
        trained = gate.detach().clone()
        gate.zero_()
        base = _errors(trainer, data, hidden, trainer.read)
        gate.copy_(trained)
        trainer.network_only = network_only
        g, best = best_weight(base, network)
        self.records.append(
            {
                "base": float((base**2).mean()),
                "network": float((network**2).mean()),
                "mix": float((mix**2).mean()),
                "trained g": float(trained),
                "best g": g,
                "best mix": best,
            }
        )
        self.states.append({k: v.clone() for k, v in module.state_dict().items()})


def load(args):
    """The data to fit and a function scoring a fitted imputer on the test."""
    if args.data == "uk":
        data = DATASETS["uk-30"]()
        _, visible, hidden, rows = held_out_split(data, args.split, args.n)

        def score(est):
            return float(np.mean(squared_errors(est, visible, hidden, rows)))

        return visible, score
    sim, fit_data = simulate("warp", args.n, "8-12", 0.05)

    def score(est):
        return fi.metrics.summarize(sim.test.truth, est.transform(sim.test.data))["mse"]

    return fit_data, score


@torch.no_grad()
def score_states(est, recorder, score):
    """Test errors of the fit, its base and the two kept states, over the base's."""
    gate = _output_gate(est.module_)
    fitted = {k: v.clone() for k, v in est.module_.state_dict().items()}
    result = {"fitted": score(est)}
    gate.zero_()
    result["base"] = score(est)
    # the first record is the start, before any epoch; after the epochs,
    # SAND's choice of smoothing validates a few more states
    epochs = recorder.records[1 : 1 + len(est.history_["epoch"])]
    k_mix = int(np.argmin([r["best mix"] for r in epochs]))
    k_net = int(np.argmin([r["network"] for r in epochs]))
    est.module_.load_state_dict(recorder.states[k_mix + 1])
    gate.fill_(epochs[k_mix]["best g"])
    result["best mix"] = score(est)
    est.module_.load_state_dict(recorder.states[k_net + 1])
    gate.fill_(1.0)
    result["network alone"] = score(est)
    est.module_.load_state_dict(fitted)
    base = result["base"]
    ratios = {f"{k} / base": v / base for k, v in result.items() if k != "base"}
    return {**result, **ratios, "best mix epoch": k_mix, "network epoch": k_net}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", choices=["uk", "warp"])
    parser.add_argument("n", type=int, help="subjects")
    parser.add_argument("split", type=int, nargs="?", default=0, help="uk: split")
    parser.add_argument("--seed", type=int, default=0, help="SAND's random_state")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--base-weight",
        choices=BASE_WEIGHTS,
        default=BASE_WEIGHTS[0],
        help="how the network's weight in the mix is set (Trainer's base_weight)",
    )
    parser.add_argument("--save", help="write the records and test scores here")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    _NeuralImputer._base_weight = args.base_weight

    data, score = load(args)
    est = fi.SANDImputer(
        random_state=args.seed, calibration_folds=None, validation_fraction=0.1
    )
    with Recorder() as recorder:
        est.fit(data)
    n_epochs = len(est.history_["epoch"])
    for epoch, record in enumerate(recorder.records[: n_epochs + 1], start=-1):
        if epoch % 5 == 4 or epoch == -1:
            print(epoch, {k: round(v, 4) for k, v in record.items()})
    print(
        f"fitted: best epoch {est.best_epoch_}, weight {est.base_weight_}, "
        f"gain {est.start_gain_}"
    )
    test = score_states(est, recorder, score)
    print({k: round(v, 4) if isinstance(v, float) else v for k, v in test.items()})
    if args.save:
        Path(args.save).write_text(
            json.dumps({"args": vars(args), "epochs": recorder.records, "test": test})
        )


if __name__ == "__main__":
    main()
