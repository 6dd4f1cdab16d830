"""Shared pytest configuration: torch on one thread, hypothesis profiles, data.

``ci`` (the default) is derandomized, so every run tries the same examples;
``HYPOTHESIS_PROFILE=dev`` tries ten times as many, freshly drawn.

The tiny network settings the test files share are in ``tests/_configs.py``.
"""

import os

import pytest
from hypothesis import HealthCheck, Phase, settings

import fdaimpute as fi


@pytest.fixture(autouse=True, scope="session")
def one_torch_thread():
    """Run torch on one thread: the tiny test models train fastest that way."""
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(autouse=True, scope="session")
def one_blas_thread_per_worker():
    """Under pytest-xdist (``-n 2``) give each worker one BLAS thread, so that
    the workers together use as many cores as there are workers."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        yield
        return
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        yield


@pytest.fixture(scope="module")
def sim():
    """The SAND paper's process: 80 subjects with 8 to 12 observations each.

    One per test module; a module that needs other data defines its own
    ``sim``, which takes precedence.
    """
    return fi.simulate.sand_paper(n=80, n_obs="8-12", random_state=0)


settings.register_profile(
    "ci",
    max_examples=10,
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=True,
    # no shrinking: keeps strict xfails and real failures fast; use the dev
    # profile (or the printed blob) to get a minimal example
    phases=(Phase.explicit, Phase.reuse, Phase.generate),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "dev",
    max_examples=100,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
