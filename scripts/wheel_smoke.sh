#!/usr/bin/env bash
# Build the wheel and the sdist, install the wheel in a fresh virtual
# environment and use it from outside the repository: the package, its data
# files and its command must all have made it into the wheel.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# No isolated build environment: the build must work offline, with the
# setuptools already installed.
python -m build --no-isolation --outdir "$work/dist" "$repo" >"$work/build.log" 2>&1 ||
    { cat "$work/build.log"; exit 1; }
wheel=("$work"/dist/fdaimpute-*.whl)
sdist=("$work"/dist/fdaimpute-*.tar.gz)
echo "built $(basename "${wheel[0]}") and $(basename "${sdist[0]}")"

# The sdist carries what a rebuild needs.
tar -tzf "${sdist[0]}" >"$work/sdist.txt"
for needed in LICENSE README.md pyproject.toml fdaimpute/py.typed \
    fdaimpute/_data/framingham.npz fdaimpute/_data/uk_electricity.npz; do
    grep -q "/$needed\$" "$work/sdist.txt" || { echo "sdist lacks $needed"; exit 1; }
done

# The dependencies (numpy, torch, ...) come from this machine's site-packages.
python -m venv --system-site-packages "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --no-deps --force-reinstall "${wheel[0]}"
cd "$work"
"$work/venv/bin/python" - <<'PY'
import importlib.metadata as md
import pathlib

import numpy as np

import fdaimpute as fi

where = pathlib.Path(fi.__file__).resolve()
assert "site-packages" in where.parts, f"imported the repository's copy: {where}"
assert fi.__version__ == md.version("fdaimpute"), (fi.__version__, md.version("fdaimpute"))
assert (where.parent / "py.typed").exists(), "py.typed is missing from the wheel"
uk = fi.datasets.load_uk_electricity()
fram = fi.datasets.load_framingham()
assert len(uk.data) == 5494 and len(fram.data) == 889, (len(uk.data), len(fram.data))
sim = fi.simulate.sand_paper(n=200, n_obs="8-12", random_state=0)
pace = fi.PACEImputer(random_state=0).fit(sim.train.data)
curves, std = pace.transform(sim.test.data, return_std=True)
assert curves.shape == std.shape == (len(sim.test.data), sim.grid.size)
assert np.isfinite(curves).all() and (std > 0).all()
print(f"wheel works: fdaimpute {fi.__version__} from {where.parent}")
PY
version="$("$work/venv/bin/fdaimpute" --version)"
echo "fdaimpute --version: $version"
