"""Pack the SAND paper's UK electricity files into fdaimpute/_data/uk_electricity.npz.

Source: ../shared/data/uk_electricity (from the SAND paper's code release,
MIT licence). Each sparsity level is stored as per-household counts, time
indices (half-hour k of 0..95, time k/95) and readings in kWh.

    python scripts/make_uk_electricity.py [SOURCE_DIR]
"""

import csv
import sys
from pathlib import Path

import numpy as np

LEVELS = ("dense", "sparse", "ssparse")


def _rows(path):
    with open(path, newline="") as fh:
        return [[float(v) for v in row if v != ""] for row in csv.reader(fh)]


def main(source):
    source = Path(source)
    out = {}
    for level in LEVELS:
        times = _rows(source / f"{level}_T_obs.csv")
        values = _rows(source / f"{level}_X_obs.csv")
        counts = np.array([int(v[0]) for v in values], dtype=np.int16)
        if any(
            len(t) != c or len(v) - 1 != c for t, v, c in zip(times, values, counts)
        ):
            raise ValueError(f"{level}: counts do not match the rows")
        index = np.rint(np.concatenate(times) * 95).astype(np.int8)
        out[f"{level}_counts"] = counts
        out[f"{level}_index"] = index
        out[f"{level}_kwh"] = np.concatenate([v[1:] for v in values])
    target = Path(__file__).resolve().parents[1] / "fdaimpute" / "_data"
    np.savez_compressed(target / "uk_electricity.npz", **out)
    (target / "uk_electricity_LICENSE.txt").write_text((source / "LICENSE").read_text())
    print(f"wrote {target / 'uk_electricity.npz'}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "../shared/data/uk_electricity")
