import numpy as np
import pytest

from ltm_sklearn._engine import moments as moments_module
from ltm_sklearn._engine.encoding import MISSING
from ltm_sklearn._engine.moments import MomentEstimator


def _random_codes(rng, n, n_states, missing=0.0):
    codes = np.stack([rng.randint(0, s, size=n) for s in n_states]).astype(np.int16)
    codes[rng.random_sample(codes.shape) < missing] = MISSING
    return codes


def test_pair_table_matches_manual_count():
    rng = np.random.RandomState(0)
    codes = _random_codes(rng, 500, [3, 4, 2], missing=0.1)
    P = MomentEstimator(codes, [3, 4, 2]).pair(0, 1)
    ok = (codes[0] >= 0) & (codes[1] >= 0)
    manual = np.zeros((3, 4))
    np.add.at(manual, (codes[0][ok], codes[1][ok]), 1.0)
    np.testing.assert_allclose(P, manual / ok.sum())


def test_moments_are_additive_over_chunks(monkeypatch):
    rng = np.random.RandomState(1)
    codes = _random_codes(rng, 3001, [3, 5, 4, 2], missing=0.05)
    w = rng.random_sample(3001)
    whole = MomentEstimator(codes, [3, 5, 4, 2], w)
    req = [((0, 1, 2), (np.eye(3)[:2], np.eye(5)[:2], np.ones((1, 4))))]
    tables, projected = whole.all_pairs(), whole.projected(req)[0]
    whole.singleton_counts()
    monkeypatch.setattr(moments_module, "_CHUNK_ROWS", 1000)  # four chunks
    chunked = MomentEstimator(codes, [3, 5, 4, 2], w, n_jobs=3)
    for key, table in tables.items():
        np.testing.assert_allclose(chunked.pair(*key), table, atol=1e-15)
    np.testing.assert_allclose(chunked.projected(req)[0], projected, atol=1e-15)
    for (a, ta), (b, tb) in zip(whole.singleton_counts(), chunked.singleton_counts()):
        np.testing.assert_allclose(a, b)
        assert ta == pytest.approx(tb)


def test_integer_weights_equal_repetition():
    rng = np.random.RandomState(2)
    codes = _random_codes(rng, 200, [3, 3, 3])
    w = rng.randint(0, 4, size=200)
    rep = np.repeat(codes, w, axis=1)
    a = MomentEstimator(codes, [3, 3, 3], w.astype(float))
    b = MomentEstimator(rep, [3, 3, 3])
    np.testing.assert_allclose(a.pair(0, 2), b.pair(0, 2))


@pytest.mark.parametrize("n_jobs, weights", [(None, "real"), (2, "real"), (None, "whole")])
def test_gram_and_pair_by_pair_counts_agree(monkeypatch, n_jobs, weights):
    import ltm_sklearn._engine.moments as mom

    rng = np.random.RandomState(5)
    # mixed sizes, and equal sizes (the Gram's blocks are cut all at once)
    sizes = [3, 5, 4, 2, 3, 6, 2, 4] if weights == "real" else [4] * 8
    codes = _random_codes(rng, 9001, sizes, missing=0.07)
    w = rng.random_sample(9001) if weights == "real" else rng.randint(0, 5, 9001).astype(float)
    monkeypatch.setattr(mom, "_gram_pays", lambda *args: True)
    gram = MomentEstimator(codes, sizes, w, n_jobs=n_jobs).all_pairs()
    monkeypatch.setattr(mom, "_gram_pays", lambda *args: False)
    single = MomentEstimator(codes, sizes, w, n_jobs=n_jobs).all_pairs()
    assert gram.keys() == single.keys()
    for key, table in single.items():
        np.testing.assert_allclose(gram[key], table, atol=1e-14)
        assert gram[key].sum() == pytest.approx(1.0)


def test_projected_dense_and_row_paths_agree(monkeypatch):
    import ltm_sklearn._engine.moments as mom

    rng = np.random.RandomState(3)
    codes = _random_codes(rng, 1000, [4, 5, 6], missing=0.1)
    projs = tuple(rng.randn(2, s) for s in (4, 5, 6))
    est = MomentEstimator(codes, [4, 5, 6])
    dense = est.projected([((0, 1, 2), projs)])[0]
    monkeypatch.setattr(mom, "_DENSE_TABLE_LIMIT", 0)
    rows = est.projected([((0, 1, 2), projs)])[0]
    np.testing.assert_allclose(dense, rows, atol=1e-12)
    # and both equal the projection of the full triple table
    ok = (codes >= 0).all(axis=0)
    full = np.zeros((4, 5, 6))
    np.add.at(full, tuple(codes[:, ok]), 1.0)
    full /= ok.sum()
    expect = np.einsum("abc,ia,jb,kc->ijk", full, *projs)
    np.testing.assert_allclose(dense, expect, atol=1e-12)


def test_projected_counts_of_complete_columns_and_unit_weights_are_exact():
    # unit weights count integers: the same tables as summed weights (weights 1 and 0,
    # whose rows of weight 0 count nothing) and as the brute-force triple table; a
    # missing entry in a column the request does not read changes nothing
    rng = np.random.RandomState(5)
    codes = _random_codes(rng, 3000, [3, 4, 5, 2])
    projs = tuple(rng.randn(2, s) for s in (3, 4, 5))
    request = [((0, 1, 2), projs)]
    unit = MomentEstimator(codes, [3, 4, 5, 2]).projected(request)[0]
    gapped = codes.copy()
    gapped[3, ::7] = -1  # a missing entry in a column the request does not read
    masked = MomentEstimator(gapped, [3, 4, 5, 2]).projected(request)[0]
    doubled = np.hstack([codes, codes[:, :10]])
    weights = np.r_[np.ones(3000), np.zeros(10)]  # not all 1: the weighted path
    weighted = MomentEstimator(doubled, [3, 4, 5, 2], weights).projected(request)[0]
    np.testing.assert_array_equal(unit, masked)
    np.testing.assert_array_equal(unit, weighted)
    full = np.zeros((3, 4, 5))
    np.add.at(full, tuple(codes[:3]), 1.0)
    expect = np.einsum("abc,ia,jb,kc->ijk", full / 3000, *projs)
    np.testing.assert_allclose(unit, expect, atol=1e-12)


def test_thousand_state_triple_never_builds_dense_table():
    # a dense 1000^3 float table would need 8 GB; the projected moment needs 2x2x2
    rng = np.random.RandomState(4)
    n = 1000
    codes = _random_codes(rng, 20_000, [n, n, n])
    projs = tuple(rng.randn(2, n) for _ in range(3))
    out = MomentEstimator(codes, [n, n, n]).projected([((0, 1, 2), projs)])[0]
    assert out.shape == (2, 2, 2) and np.all(np.isfinite(out))


def test_sums_over_rows_do_not_depend_on_n_jobs(monkeypatch):
    # the rows are cut into chunks of a fixed size, summed in the same order whatever
    # the number of threads: weighted moments are the same to the last bit
    monkeypatch.setattr(moments_module, "_CHUNK_ROWS", 700)
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 3, size=(5, 5000))
    weights = rng.random(5000)
    one, two = (MomentEstimator(codes, [3] * 5, weights, n_jobs=n_jobs) for n_jobs in (1, 2))
    pairs = [(0, 1), (2, 4), (1, 3)]
    for key, table in one.pairs(pairs).items():
        np.testing.assert_array_equal(table, two.pairs(pairs)[key])
    for (a, ta), (b, tb) in zip(one.singleton_counts(), two.singleton_counts()):
        np.testing.assert_array_equal(a, b)
        assert ta == tb
