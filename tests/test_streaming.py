"""partial_fit (accumulated statistics) and fitting on Dask collections."""

import warnings

import numpy as np
import pandas as pd
import pytest

from ltm_sklearn import (
    GaussianLatentTree,
    HierarchicalTensorLTM,
    KernelLatentTree,
    LatentTreeClassifier,
    LatentTreeEM,
    QuartetTreeLearner,
    SpectralLatentTree,
)
from ltm_sklearn._sources import streaming as _streaming
from ltm_sklearn.datasets import LatentTreeModel, balanced_binary_tree

ESTIMATORS = [SpectralLatentTree, HierarchicalTensorLTM, QuartetTreeLearner, LatentTreeEM]


@pytest.fixture(scope="module")
def data():
    truth = LatentTreeModel.random(balanced_binary_tree(8), 2, 3, random_state=0)
    return truth.sample(3000, random_state=1), truth.sample(1000, random_state=2)


def _batches(n, n_batches):
    return np.array_split(np.arange(n), n_batches)


@pytest.mark.parametrize("Est", ESTIMATORS)
def test_partial_fit_equals_fit_on_the_concatenation(Est, data):
    X, T = data
    ref = Est(2, random_state=0).fit(X)
    for n_batches in (1, 7, 100):
        est = Est(2, random_state=0)
        for rows in _batches(len(X), n_batches):
            assert est.partial_fit(X[rows]) is est
        assert est.n_samples_seen_ == len(X)
        np.testing.assert_allclose(est.score_samples(T), ref.score_samples(T), atol=1e-9)
        assert est.tree_.edges == ref.tree_.edges


def test_the_model_is_usable_after_every_call(data):
    X, T = data
    est = SpectralLatentTree(2, structure="clnj", random_state=0)
    seen = []
    for rows in _batches(len(X), 4):
        est.partial_fit(X[rows])
        seen.append(rows)
        ref = SpectralLatentTree(2, structure="clnj", random_state=0).fit(X[np.concatenate(seen)])
        np.testing.assert_allclose(est.score_samples(T), ref.score_samples(T), atol=1e-9)
        assert est.cpts_.keys() == ref.cpts_.keys()


def test_late_categories_nan_and_weights_in_batches():
    rng = np.random.default_rng(0)
    truth = LatentTreeModel.random(balanced_binary_tree(6), 2, 4, random_state=3)
    codes = truth.sample(2000, random_state=4)
    X = np.array(["a", "b", "c", "d"], dtype=object)[codes]
    X[:1000][X[:1000] == "d"] = "c"  # "d" first appears in the second half
    X[rng.random(X.shape) < 0.05] = None
    w = rng.integers(0, 3, size=len(X)).astype(float)  # zero weights too
    ref = LatentTreeEM(2, random_state=0).fit(X, sample_weight=w)
    est = LatentTreeEM(2, random_state=0)
    for rows in _batches(len(X), 9):
        est.partial_fit(X[rows], sample_weight=w[rows])
    assert est.categories_ == ref.categories_
    T = X[:300]
    np.testing.assert_allclose(est.score_samples(T), ref.score_samples(T), atol=1e-9)


def test_declared_categories_and_pandas_batches():
    truth = LatentTreeModel.random(balanced_binary_tree(4), 2, 3, random_state=0)
    X = pd.DataFrame(truth.sample(600, random_state=0), columns=list("abcd"))
    cats = [[0, 1, 2, 5]] * 4
    ref = SpectralLatentTree(2, categories=cats, random_state=0).fit(X)
    est = SpectralLatentTree(2, categories=cats, random_state=0)
    for rows in _batches(len(X), 3):
        est.partial_fit(X.iloc[rows])
    assert list(est.feature_names_in_) == list("abcd")
    np.testing.assert_allclose(est.score_samples(X), ref.score_samples(X), atol=1e-9)
    bad = X.iloc[:5].copy()
    bad.iloc[0, 0] = 7
    with pytest.raises(ValueError, match="not among its declared categories"):
        SpectralLatentTree(2, categories=cats).partial_fit(X).partial_fit(bad).score(X)
    with pytest.raises(ValueError, match="feature names should match"):
        SpectralLatentTree(2).partial_fit(X).partial_fit(X.iloc[:, :3])
    with pytest.raises(ValueError, match="3 features"):
        SpectralLatentTree(2).partial_fit(X.to_numpy()).partial_fit(X.to_numpy()[:, :3])


def test_partial_fit_after_fit_warns_and_starts_from_its_batch(data):
    # scikit-learn's API calls partial_fit after fit; the rows fit saw are not kept, and
    # a model of the new batch alone must not come silently
    X, T = data
    est = SpectralLatentTree(2, structure="clnj", random_state=0).fit(X[:300])
    with pytest.warns(UserWarning, match="fitted with fit, which keeps no statistics"):
        est.partial_fit(X[300:])
    alone = SpectralLatentTree(2, structure="clnj", random_state=0).partial_fit(X[300:])
    np.testing.assert_allclose(est.score_samples(T), alone.score_samples(T))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est.partial_fit(X[:100])  # a stream now: no warning
    # fit after partial_fit starts afresh
    refit = alone.fit(X[:300])
    fresh = SpectralLatentTree(2, structure="clnj", random_state=0).fit(X[:300])
    np.testing.assert_allclose(refit.score_samples(T), fresh.score_samples(T))
    assert "_stream" not in refit.__dict__


def test_beyond_the_sample_pairs_stay_exact(data, monkeypatch):
    """More rows than the sample holds: pair tables are still exact, the model close."""
    X, T = data
    monkeypatch.setattr(_streaming, "SAMPLE_ROWS", 500)
    est = SpectralLatentTree(2, random_state=0)
    for rows in _batches(len(X), 10):
        est.partial_fit(X[rows])
    est.score(T)
    stream = est._stream
    assert stream.sample_codes.shape[1] == 500 and stream.n_rows == len(X)
    moments = stream.moments(*stream.final_encoder())
    ref = SpectralLatentTree(2, random_state=0).fit(X)
    from ltm_sklearn._engine.moments import MomentEstimator

    encoder = ref._leaves.encoder
    exact = MomentEstimator(encoder.transform(X), encoder.n_states_)
    for key, table in exact.all_pairs().items():
        np.testing.assert_allclose(moments.pair(*key), table, atol=1e-12)
    assert abs(est.score(T) - ref.score(T)) < 0.05


def test_fit_forgets_the_stream(data):
    X, T = data
    est = SpectralLatentTree(2, random_state=0).partial_fit(X[:100])
    est.fit(X)
    ref = SpectralLatentTree(2, random_state=0).fit(X)
    np.testing.assert_allclose(est.score_samples(T), ref.score_samples(T))
    assert not hasattr(est, "n_samples_seen_")


def test_a_batch_forgets_every_attribute_of_the_earlier_model(data):
    X, _ = data
    est = SpectralLatentTree(2, structure="hclt", softening="auto", random_state=0)
    est.partial_fit(X[:1500])
    # any fitted attribute, read first, builds the model (not only the tree's)
    assert est.softening_ in est.softening_scores_
    est.set_params(softening=0.2).partial_fit(X[1500:])
    assert est.softening_ == 0.2 and not hasattr(est, "softening_scores_")
    ref = SpectralLatentTree(2, structure="hclt", softening=0.2, random_state=0).fit(X)
    assert est.softening_ == ref.softening_ and est.score(X) == pytest.approx(ref.score(X))
    # a structure test's statistics belong to the model too
    q = QuartetTreeLearner(2, random_state=0).partial_fit(X[:1500])
    first = q.n_quartet_tests_
    q.partial_fit(X[1500:])
    assert q.n_quartet_tests_ == QuartetTreeLearner(2, random_state=0).fit(X).n_quartet_tests_
    assert "n_quartet_tests_" not in vars(q.partial_fit(X[:10])) and first > 0


def test_batches_build_the_model_once_when_it_is_read(data, monkeypatch):
    # a stream of batches costs one fit: nothing in partial_fit builds the stale model
    # (the validation of a batch of an array asks for the absent feature_names_in_)
    from ltm_sklearn._estimators.partial_fit import PartialFitMixin

    X, _ = data
    builds = []
    original = PartialFitMixin._build_from_stream
    monkeypatch.setattr(
        PartialFitMixin, "_build_from_stream", lambda self: builds.append(1) or original(self)
    )
    est = SpectralLatentTree(2, random_state=0)
    for rows in _batches(len(X), 10):
        est.partial_fit(X[rows])
    assert not builds and not hasattr(est, "feature_names_in_") and not builds
    est.score(X[:5])
    est.score(X[:5])
    assert len(builds) == 1


def test_kernel_model_has_no_partial_fit():
    assert not hasattr(KernelLatentTree(), "partial_fit")


# ---------------------------------------------------------------------- Dask
@pytest.fixture(scope="module")
def client():
    pytest.importorskip("dask.dataframe")
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as c,
    ):
        yield c


@pytest.mark.parametrize("Est", [SpectralLatentTree, LatentTreeEM])
def test_dask_fit_on_a_local_cluster_equals_the_in_memory_fit(Est, data, client):
    import dask.array as da
    import dask.dataframe as dd

    X, T = data
    frame = pd.DataFrame(X, columns=[f"c{j}" for j in range(X.shape[1])])
    ref = Est(2, random_state=0).fit(frame)
    est = Est(2, random_state=0).fit(dd.from_pandas(frame, npartitions=5))
    assert list(est.feature_names_in_) == list(frame.columns)
    test = pd.DataFrame(T, columns=frame.columns)
    np.testing.assert_allclose(est.score_samples(test), ref.score_samples(test), atol=1e-8)
    arr = Est(2, random_state=0).fit(da.from_array(X, chunks=(700, 3)))
    np.testing.assert_allclose(arr.score_samples(T), ref.score_samples(test), atol=1e-8)


def test_dask_fit_keeps_declared_categories_as_fit_does(data):
    dd = pytest.importorskip("dask.dataframe")
    X, _ = data
    declared = pd.CategoricalDtype([0, 1, 2, 3, 9])  # 9 never occurs
    frame = pd.DataFrame(X[:1500], columns=[f"c{j}" for j in range(X.shape[1])])
    frame = frame.astype(declared)
    ref = SpectralLatentTree(2, random_state=0).fit(frame)
    est = SpectralLatentTree(2, random_state=0).fit(dd.from_pandas(frame, npartitions=3))
    assert est.categories_ == ref.categories_ and 9 in est.categories_[0]
    np.testing.assert_allclose(est.score_samples(frame), ref.score_samples(frame), atol=1e-8)


def test_a_dask_fit_checks_the_columns_dtypes_as_fit_does(data):
    dd = pytest.importorskip("dask.dataframe")
    X, _ = data
    frame = pd.DataFrame(X[:300], columns=[f"c{j}" for j in range(X.shape[1])])
    dated = frame.assign(t=pd.Timestamp("2020-01-01"))
    for source in (dated, dd.from_pandas(dated, npartitions=2)):
        with pytest.raises(TypeError, match="cannot read column 't' of dtype datetime64"):
            SpectralLatentTree(2).fit(source)


def test_queries_and_partial_fit_refuse_a_dask_collection(data):
    # read as an array a Dask frame loses its column names: a frame with its columns in
    # another order would be scored unchecked
    dd = pytest.importorskip("dask.dataframe")
    X, _ = data
    frame = pd.DataFrame(X[:600], columns=[f"c{j}" for j in range(X.shape[1])])
    est = SpectralLatentTree(2, random_state=0).fit(frame)
    lazy = dd.from_pandas(frame[frame.columns[::-1]], npartitions=2)
    for query in (est.score, est.score_samples, est.predict_proba):
        with pytest.raises(TypeError, match="reads a Dask collection in fit only"):
            query(lazy)
    with pytest.raises(TypeError, match="reads a Dask collection in fit only"):
        SpectralLatentTree(2).partial_fit(lazy)


def test_dask_beyond_the_sample_runs_em_on_every_partition(data, client, monkeypatch):
    import dask.array as da

    X, T = data
    monkeypatch.setattr(_streaming, "SAMPLE_ROWS", 400)
    ref = LatentTreeEM(2, structure="clnj", random_state=0).fit(X)
    est = LatentTreeEM(2, structure="clnj", random_state=0).fit(da.from_array(X, chunks=600))
    assert est.tree_.edges == ref.tree_.edges  # from exact pair tables
    # EM finished on all rows: the same objective up to where EM stops (tol=1e-4 per
    # iteration; the two runs take different paths: 34 vs 11 iterations here)
    assert abs(est.lower_bound_ - ref.lower_bound_) < 1e-3
    assert abs(est.score(T) - ref.score(T)) < 5e-3


@pytest.mark.parametrize("Est", [SpectralLatentTree, LatentTreeEM])
def test_few_distinct_rows_beyond_the_sample_give_the_in_memory_model(Est, client, monkeypatch):
    # 3,000 rows of 6 binary columns (at most 64 distinct rows) and a sample of 400 rows:
    # partial_fit and the Dask fit keep every distinct row with its count, so EM runs on
    # all the rows, as fit does (it merges identical rows), and the three sources give
    # one model - the same EM iterations and the same scores
    import dask.array as da

    truth = LatentTreeModel.random(balanced_binary_tree(6), 2, 2, random_state=0)
    X, T = truth.sample(3000, random_state=1), truth.sample(500, random_state=2)
    monkeypatch.setattr(_streaming, "SAMPLE_ROWS", 400)
    ref = Est(2, random_state=0).fit(X)
    streamed = Est(2, random_state=0)
    for rows in _batches(len(X), 9):
        streamed.partial_fit(X[rows])
    spread = Est(2, random_state=0).fit(da.from_array(X, chunks=(700, 6)))
    for est in (streamed, spread):
        assert est.n_iter_ == ref.n_iter_ and est.tree_.edges == ref.tree_.edges
        np.testing.assert_allclose(est.score_samples(T), ref.score_samples(T), atol=1e-8)
    # more distinct rows than the sample holds: the sample stands in for them
    wide = LatentTreeModel.random(balanced_binary_tree(12), 2, 3, random_state=0)
    stats = _streaming.RowStatistics(12, sample_rows=400, random_state=0)
    stats.add(wide.sample(3000, random_state=1), np.ones(3000))
    assert stats.compact_distinct().distinct is None


def test_dask_input_errors(client):
    import dask.array as da

    X = da.zeros((10, 3), chunks=5)
    with pytest.raises(ValueError, match="sample_weight"):
        SpectralLatentTree().fit(X, sample_weight=np.ones(10))
    with pytest.raises(TypeError, match="Dask"):
        KernelLatentTree().fit(X)
    # the estimators that fit rows in memory say so (the classifier read a frame as an
    # array and lost its column names; the Gaussian tree's message spoke of queries)
    for est in (GaussianLatentTree(), LatentTreeClassifier()):
        with pytest.raises(TypeError, match=r"\.fit reads rows in memory, not a Dask"):
            est.fit(X, np.zeros(10) if isinstance(est, LatentTreeClassifier) else None)


@pytest.mark.parametrize("Est", [SpectralLatentTree, HierarchicalTensorLTM, QuartetTreeLearner])
def test_dask_reads_the_projected_moments_in_one_pass(Est, client, monkeypatch):
    """The explicit recovery asks for moments node by node; on Dask they are learned from
    a dry run on the sample and computed in one pass, and the model is still exact."""
    import dask.array as da

    from ltm_sklearn._sources import distributed as _distributed

    passes = []
    original = _distributed.DaskMoments._map_chunks

    def counting(self, func, *args):
        passes.append(func.__name__)
        return original(self, func, *args)

    monkeypatch.setattr(_distributed.DaskMoments, "_map_chunks", counting)
    truth = LatentTreeModel.random(balanced_binary_tree(16), 2, 3, random_state=0)
    X = truth.sample(4000, random_state=1)
    kw = {} if Est is QuartetTreeLearner else {"structure": "me"}
    ref = Est(2, max_iter=0, random_state=0, **kw).fit(X)
    est = Est(2, max_iter=0, random_state=0, **kw).fit(da.from_array(X, chunks=1000))
    assert passes == ["_projected_sums"]
    np.testing.assert_allclose(est.score_samples(X), ref.score_samples(X), atol=1e-8)


def test_moment_sources_declare_their_capabilities():
    from ltm_sklearn._engine.moments import MomentEstimator, MomentSource

    codes = np.random.RandomState(0).randint(0, 3, size=(4, 50))
    in_memory = MomentEstimator(codes, [3, 3, 3, 3])
    assert isinstance(in_memory, MomentSource)
    assert in_memory.exact_tiles and in_memory.n_rows_total is None
    assert in_memory.sample_moments() is in_memory
    streamed = _streaming.StatisticsMoments(codes, [3, 3, 3, 3])
    assert isinstance(streamed, MomentSource) and streamed.exact_tiles
    # codes that are a sample of the rows must not stand in for the exact pair tables
    streamed.sampled = True
    assert not streamed.exact_tiles and not streamed.subset([0, 1]).exact_tiles


def test_a_batch_whose_values_read_as_earlier_categories_of_another_type_warns():
    X = np.random.RandomState(0).randint(0, 3, (60, 2))
    est = SpectralLatentTree(2, random_state=0).partial_fit(X.astype(str))
    with pytest.warns(UserWarning, match=r"Column 0: the value 0 \(int\) .* two categories"):
        est.partial_fit(X)
    assert len(est.categories_[0]) == 6
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the same types again, or mixed within one batch
        est.partial_fit(X[:10])
        SpectralLatentTree(2, random_state=0).partial_fit(np.r_[X, X.astype(str)].astype(object))


def test_an_empty_batch_is_refused_and_leaves_the_model_as_it_was(data):
    X, T = data
    est = SpectralLatentTree(2, random_state=0).partial_fit(X[:500])
    before = est.score_samples(T)
    with pytest.raises(ValueError, match="0 sample"):
        est.partial_fit(X[:0])
    np.testing.assert_array_equal(est.score_samples(T), before)
