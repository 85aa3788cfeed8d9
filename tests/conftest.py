"""Shared test setup."""

import numpy as np
import pytest


@pytest.fixture(autouse=True)
def _seeded_global_random_state():
    # An estimator with random_state=None draws from NumPy's global state, which a new
    # process seeds from the operating system: seeding it per test makes every run of a
    # test draw the same numbers on every machine, whatever ran before it.
    np.random.seed(0)  # noqa: NPY002 - the legacy global state is what random_state=None reads
