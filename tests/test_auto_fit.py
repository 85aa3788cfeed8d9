"""The automatic fit's own rules (ltm_sklearn/_estimators/auto_fit.py), tested directly."""

from types import SimpleNamespace

import numpy as np

from ltm_sklearn._estimators.auto_fit import _outpaced


def _level(means, rng, n=400):
    """Held-out log-likelihoods per structure around the given means."""
    return {name: m + 0.1 * rng.standard_normal(n) for name, m in means.items()}


def test_outpaced_drops_a_far_behind_structure_that_does_not_close_in():
    rng = np.random.RandomState(0)
    k, previous = 3, 2
    trees = {n: SimpleNamespace(hidden_nodes=[9]) for n in ("a", "b", "c", "d")}
    trees["cl"] = SimpleNamespace(hidden_nodes=[])  # no hidden node: costs nothing
    now = _level({"a": -33.0, "b": -33.7, "c": -37.0, "d": -36.0, "cl": -40.0}, rng)
    held = SimpleNamespace(weights=np.ones(400))
    lls = {(n, k): v for n, v in now.items()}
    level_scores = {n: float(v.mean()) for n, v in now.items()}
    # a gained 2 nats; b is 0.7 behind (within a level's progress); c is 4 behind and
    # fell; d is 3 behind but gained more than a
    scores = {("a", previous): -35.0, ("b", previous): -35.5, ("c", previous): -35.4}
    scores[("d", previous)] = -39.0
    alive = ["a", "b", "c", "d", "cl"]
    kept = _outpaced(alive, level_scores, scores, previous, k, trees, held, lls)
    assert kept == ["a", "b", "d", "cl"]


def test_outpaced_keeps_structures_within_two_standard_errors():
    rng = np.random.RandomState(1)
    k, previous = 4, 3
    trees = {n: SimpleNamespace(hidden_nodes=[9]) for n in ("a", "b")}
    # b trails by 0.01 with noisy rows: within noise, even though a gained only 0.001
    now = {"a": -10.0 + rng.standard_normal(50), "b": -10.01 + rng.standard_normal(50)}
    lls = {(n, k): v for n, v in now.items()}
    level_scores = {n: float(v.mean()) for n, v in now.items()}
    lead = max(level_scores, key=level_scores.get)
    other = "b" if lead == "a" else "a"
    scores = {(lead, previous): level_scores[lead] - 0.001, (other, previous): -9.0}
    held = SimpleNamespace(weights=np.ones(50))
    kept = _outpaced(["a", "b"], level_scores, scores, previous, k, trees, held, lls)
    assert kept == ["a", "b"]
