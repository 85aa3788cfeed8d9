"""Encoding of the columns: categories, declared categories, unseen values, the continuity
check and the warnings of :class:`~ltm_sklearn._engine.encoding.CategoricalEncoder`, and
the mixed-table encoding of :mod:`ltm_sklearn._engine.mixed_columns` (which columns are
categorical, the standardisation of the continuous ones, :class:`MixedEncoder`)."""

import re
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.exceptions import ConvergenceWarning
from test_reliability import DISCRETE, sample

from ltm_sklearn import (
    GaussianLatentTree,
    HierarchicalTensorLTM,
    KernelLatentTree,
    LatentTreeClassifier,
    LatentTreeEM,
    QuartetTreeLearner,
    SpectralLatentTree,
)
from ltm_sklearn._engine.encoding import MISSING, UNSEEN, CategoricalEncoder
from ltm_sklearn._engine.mixed_columns import MixedEncoder, categorical_mask, column_scales


# ---------------------------------------------------------------- categories and value types
def test_encoder_value_types():
    X = pd.DataFrame(
        {
            "s": ["a", "b", None, "a"],
            "f": [1.0, 2.0, np.nan, 1.0],
            "c": pd.Categorical(["x", "y", "x", "y"]),
            "i": [3, 3, 4, 4],
        }
    )
    enc = CategoricalEncoder().fit(X)
    assert enc.categories_ == [["a", "b"], [1, 2], ["x", "y"], [3, 4]]
    codes = enc.transform(X)
    assert codes.shape == (4, 4)
    assert codes[0].tolist() == [0, 1, MISSING, 0]
    assert codes[1].tolist() == [0, 1, MISSING, 0]
    # whole-number floats and ints are one category; unseen values get their own code
    new = pd.DataFrame({"s": ["z"], "f": [2], "c": ["x"], "i": [5.0]})
    assert enc.transform(new)[:, 0].tolist() == [UNSEEN, 1, 0, UNSEEN]


def test_encoder_rejects_inf_and_unhashable():
    with pytest.raises(ValueError, match="infinite"):
        CategoricalEncoder().fit(np.array([[1.0, np.inf]]))
    X = np.array([[1, {"a": 1}]], dtype=object)
    with pytest.raises(TypeError, match="hashable"):
        CategoricalEncoder().fit(X)


def test_true_and_one_are_two_categories_in_fit_and_in_scoring():
    rng = np.random.RandomState(0)
    col = np.array([True, 1, 2], dtype=object)[rng.randint(0, 3, 600)]
    X = np.column_stack([col, rng.randint(0, 2, 600), rng.randint(0, 2, 600)]).astype(object)
    est = SpectralLatentTree(1, structure="star").fit(X)  # k' = 1: independent columns
    assert len(est.categories_[0]) == 3
    row_true = np.array([[True, 0, 1]], dtype=object)
    row_one = np.array([[1, 0, 1]], dtype=object)
    alone = est.score_samples(row_true)[0]
    together = est.score_samples(np.vstack([row_true, row_one]))
    assert together[0] == pytest.approx(alone)
    values = (True, 1, 2)  # (not dict keys: True == 1 in Python)
    freq = [np.mean([type(c) is type(v) and c == v for c in col]) for v in values]
    # the column's own (smoothed) frequencies, True and 1 apart
    cond = est.conditional_proba(row_true, 0)[0]
    order = [
        next(i for i, c in enumerate(est.categories_[0]) if type(c) is type(v) and c == v)
        for v in values
    ]
    np.testing.assert_allclose(cond[order], freq, atol=0.01)


# ---------------------------------------------------------------- declared categories
def test_declared_pandas_categories_are_honoured():
    _, X = sample(1000, d=4)
    df = pd.DataFrame(X.astype(str), columns=list("abcd"))
    df["a"] = pd.Categorical(df["a"], categories=["0", "1", "2", "9"])
    est = SpectralLatentTree(2, random_state=0).fit(df)
    assert est.categories_[0] == ["0", "1", "2", "9"]
    row = df.iloc[:1].copy()
    row["a"] = pd.Categorical(["9"], categories=["0", "1", "2", "9"])
    # a declared level is a known category (code 3) with a smoothed probability
    assert est._encode(row)[0, 0] == 3
    assert est.conditional_proba(row, "a")[0, 3] > 0
    rest = est.score_samples(row.assign(a=np.nan))[0]
    # the four states of column a sum to one
    grid = pd.concat([df.iloc[:1]] * 4, ignore_index=True)
    grid["a"] = pd.Categorical(["0", "1", "2", "9"], categories=["0", "1", "2", "9"])
    assert np.exp(est.score_samples(grid)).sum() == pytest.approx(np.exp(rest))


def test_declared_fractional_categories_are_accepted():
    rng = np.random.RandomState(1)
    levels = np.round(np.linspace(0.05, 9.95, 60), 2)
    X = np.column_stack([rng.choice(levels, 400), rng.randint(0, 2, 400)])
    with pytest.raises(ValueError, match="Column 0 looks continuous"):
        SpectralLatentTree(2).fit(X)
    est = SpectralLatentTree(2, categories=[list(levels), None], max_iter=5).fit(X)
    assert len(est.categories_[0]) == 60


# ---------------------------------------------------------------- continuity check
@pytest.mark.parametrize("cls", DISCRETE)
def test_continuous_column_is_refused_with_its_name(cls):
    rng = np.random.RandomState(0)
    X = pd.DataFrame(
        {"a": rng.randint(0, 3, 300), "height": rng.randn(300), "c": rng.randint(0, 2, 300)}
    )
    with pytest.raises(ValueError, match="Column 'height' looks continuous.*KernelLatentTree"):
        cls(2).fit(X)
    with pytest.raises(ValueError, match="'height' looks continuous"):
        LatentTreeClassifier(cls(2)).fit(X, rng.randint(0, 2, 300))
    # whole-number floats are categories; so are declared ones
    X["height"] = np.round(X["height"] * 2)
    cls(2, max_iter=5).fit(X)


def test_categorical_estimators_keep_their_advice():
    X = np.random.default_rng(0).normal(size=(300, 3))
    with pytest.raises(ValueError, match="Column 0 looks continuous.*KernelLatentTree"):
        SpectralLatentTree().fit(X)


def _mixed_column_table():
    X = np.random.default_rng(0).normal(size=(300, 2)).astype(object)
    X[::3, 1] = "x"
    return X


def test_kernel_mixed_object_column_named():
    with pytest.raises(ValueError) as info:
        KernelLatentTree().fit(_mixed_column_table())
    message = str(info.value)
    assert message.startswith("KernelLatentTree: column 1 is modelled as categorical")
    assert "'x'" in message and "categorical_features" in message
    assert "Model numeric columns with KernelLatentTree" not in message


def test_kernel_mixed_object_column_named_in_frame():
    X = pd.DataFrame(_mixed_column_table(), columns=["u", "v"])
    X["u"] = X["u"].astype(float)
    with pytest.raises(ValueError, match="column 'v' is modelled as categorical"):
        KernelLatentTree().fit(X)


def test_kernel_declared_categorical_continuous_column_named():
    X = np.random.default_rng(0).normal(size=(300, 3))
    with pytest.raises(ValueError) as info:
        KernelLatentTree(categorical_features=[2]).fit(X)
    message = str(info.value)
    assert "column 2 is modelled as categorical" in message
    assert "leave it out of categorical_features" in message


# ---------------------------------------------------------------- identifier and retyped columns
def test_an_identifier_column_is_named_in_a_warning():
    rng = np.random.RandomState(0)
    X = pd.DataFrame({"rownames": np.arange(300), "a": rng.randint(0, 3, 300)})
    X["b"] = (X["a"] + (rng.rand(300) < 0.2)) % 3
    with pytest.warns(UserWarning, match="'rownames' has 300 distinct values in 300 rows"):
        SpectralLatentTree(2, structure="chow_liu").fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an ordinary column is not flagged
        SpectralLatentTree(2, structure="chow_liu").fit(X[["a", "b"]])


def test_scoring_a_column_retyped_since_fit_is_named_in_a_warning():
    rng = np.random.RandomState(0)
    X = pd.DataFrame({"a": rng.randint(0, 3, 300), "b": rng.randint(0, 3, 300)})
    est = SpectralLatentTree(2, structure="chow_liu").fit(X)
    retyped = X.astype({"a": str})
    with pytest.warns(
        UserWarning, match=r"Column 'a': 100% .* '\d' \(str\) matches the fitted \d \(int\)"
    ):
        low = est.score(retyped)
    assert low < est.score(X)  # read as unseen categories, as the warning says
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est.score(X)


@pytest.mark.parametrize(
    "fitted, scored, match",
    [
        ([True, False], [1, 0], r"1 \(int\) matches the fitted True \(bool\)"),
        (["0", "1", "2"], [0.5 + 0.5, 2.0], r"1\.0 \(float\) matches the fitted '1' \(str\)"),
        ([0, 1, 2], ["1.0", "2.0"], r"'1\.0' \(str\) matches the fitted 1 \(int\)"),
    ],
)
def test_values_of_another_type_that_read_alike_are_named(fitted, scored, match):
    rng = np.random.RandomState(0)
    X = np.array([[fitted[i % len(fitted)], rng.randint(2)] for i in range(60)], dtype=object)
    est = SpectralLatentTree(2, structure="chow_liu").fit(X)
    Z = np.array([[scored[i % len(scored)], 0] for i in range(10)], dtype=object)
    with pytest.warns(UserWarning, match=match):
        est.score_samples(Z)


# ---------------------------------------------------------------- column types of a mixed table
def test_column_types_from_dtypes_and_overrides():
    X = pd.DataFrame(
        {
            "f": [0.1, 0.5, 1.2, 0.3] * 5,
            "i": [1, 2, 3, 4] * 5,
            "cat": pd.Categorical(list("abab") * 5),
            "obj": ["u", "v", "u", None] * 5,
            "b": [True, False] * 10,
            "s": pd.array(list("xyxy") * 5, dtype="string"),
        }
    )
    est = KernelLatentTree(max_iter=5, random_state=0).fit(X)
    assert est.is_categorical_.tolist() == [False, False, True, True, True, True]
    assert est.categories_[1] is None and list(est.categories_[3]) == ["u", "v"]
    assert np.isnan(est.bandwidths_[2]) and est.bandwidths_[0] > 0
    for spec in (["i", "cat", "obj", "b", "s"], [1, 2, 3, 4, 5], [0, 1, 1, 1, 1, 1]):
        spec = np.asarray(spec, dtype=bool) if len(spec) == 6 else spec
        est = KernelLatentTree(categorical_features=spec, max_iter=5).fit(X)
        assert est.is_categorical_.tolist() == [False, True, True, True, True, True]
    # object arrays: columns holding labels are categorical
    est = KernelLatentTree(max_iter=5).fit(X.to_numpy(dtype=object))
    assert est.is_categorical_.tolist() == [False, False, True, True, True, True]
    with pytest.raises(ValueError, match="unknown columns"):
        KernelLatentTree(categorical_features=["nope"]).fit(X)
    with pytest.raises(ValueError, match="indices outside"):
        KernelLatentTree(categorical_features=[9]).fit(X)
    with pytest.raises(ValueError, match="boolean mask must have 6"):
        KernelLatentTree(categorical_features=[True, False]).fit(X)
    with pytest.raises(ValueError, match="names columns"):
        KernelLatentTree(categorical_features=["a"]).fit(X.to_numpy(dtype=object))
    with pytest.raises(TypeError, match="'cat' is modelled as continuous.*'a'"):
        KernelLatentTree(categorical_features=None).fit(X)
    empty = X.assign(obj=pd.Series([None] * len(X), dtype=object))
    with pytest.raises(ValueError, match=r"Columns \[3\] have no observed value"):
        KernelLatentTree().fit(empty)


# ---------------------------------------------------------------- unit: categorical_mask
def test_categorical_mask_from_dataframe_dtypes():
    X = pd.DataFrame(
        {
            "f": [0.5, 1.5],
            "i": [1, 2],
            "cat": pd.Categorical(["a", "b"]),
            "obj": ["u", None],
            "b": [True, False],
            "s": pd.array(["x", "y"], dtype="string"),
        }
    )
    assert categorical_mask(X).tolist() == [False, False, True, True, True, True]
    assert categorical_mask(X, "from_dtype").tolist() == [False, False, True, True, True, True]
    assert categorical_mask(X, None).tolist() == [False] * 6


def test_categorical_mask_from_object_array():
    X = np.array(
        [
            [0.5, "a", 3, None, True, 1.5],
            [1.5, "b", 4, 2.0, False, "x"],
            [2.5, None, np.int64(5), np.nan, True, 2.5],
        ],
        dtype=object,
    )
    # numbers (missing entries aside) are continuous; labels, bools and a column holding
    # one label among numbers are categorical
    assert categorical_mask(X).tolist() == [False, True, False, False, True, True]
    assert categorical_mask(X.tolist()).tolist() == [False, True, False, False, True, True]
    assert categorical_mask(np.zeros((3, 2))).tolist() == [False, False]
    assert categorical_mask(np.zeros((3, 2), dtype=np.int64)).tolist() == [False, False]
    assert categorical_mask(np.zeros((3, 2), dtype=bool)).tolist() == [True, True]
    assert categorical_mask(np.array([["a", "b"]])).tolist() == [True, True]
    assert categorical_mask(X, None).tolist() == [False] * 6


def test_categorical_mask_from_indices_names_and_boolean_mask():
    X = pd.DataFrame(np.zeros((3, 4)), columns=["a", "b", "c", "d"])
    expected = [False, True, False, True]
    assert categorical_mask(X, [1, 3]).tolist() == expected
    assert categorical_mask(X, np.array([3, 1], dtype=np.uint8)).tolist() == expected
    assert categorical_mask(X, ["b", "d"]).tolist() == expected
    assert categorical_mask(X, np.array(["d", "b"], dtype=object)).tolist() == expected
    assert categorical_mask(X.to_numpy(), [1, 3]).tolist() == expected
    spec = np.array(expected)
    mask = categorical_mask(X, spec)
    assert mask.dtype == bool and mask.tolist() == expected
    mask[0] = True  # a copy: the caller's mask is left alone
    assert spec.tolist() == expected
    assert categorical_mask(X, []).tolist() == [False] * 4
    # numbers given as names are names, not positions
    named = pd.DataFrame(np.zeros((2, 3)), columns=[10, 20, 30])
    assert categorical_mask(named, ["30"]).tolist() == [False, False, True]


@pytest.mark.parametrize(
    "frame, spec, message",
    [
        (True, ["a", "zz"], r"names unknown columns \['zz'\]"),
        (False, ["a"], "names columns, which needs X as a DataFrame"),
        (True, [4], r"indices outside \[0, 4\): \[4\]"),
        (False, [0, -1], r"indices outside \[0, 4\): \[0, -1\]"),
        (True, [True, False], "boolean mask must have 4 entries .* got 2"),
        (False, [[0, 1]], "must be 1D"),
        (True, [0.5], r"'from_dtype', None, or column indices, names or a boolean mask; got"),
    ],
    ids=[
        "unknown-name",
        "name-in-array",
        "index-too-big",
        "negative-index",
        "mask-length",
        "2d-spec",
        "float-spec",
    ],
)
def test_categorical_mask_refuses_bad_specs(frame, spec, message):
    X = np.zeros((3, 4))
    X = pd.DataFrame(X, columns=list("abcd")) if frame else X
    with pytest.raises(ValueError, match=message):
        categorical_mask(X, spec)


def test_categorical_mask_refuses_an_array_that_is_not_2d():
    with pytest.raises(ValueError, match="Expected a 2D array, got 1D"):
        categorical_mask(np.zeros(3))
    with pytest.raises(ValueError, match="Expected a 2D array, got 1D"):
        categorical_mask([1.0, 2.0, 3.0], [0])


# ---------------------------------------------------------------- unit: column_scales
def _weighted_moments(X, w):
    mean = np.average(X, axis=0, weights=w)
    return mean, np.sqrt(np.average((X - mean) ** 2, axis=0, weights=w))


def test_column_scales_equal_numpy_weighted_moments():
    rng = np.random.default_rng(0)
    X = rng.normal([3.0, -50.0, 0.0], [2.0, 0.1, 7.0], size=(200, 3))
    w = rng.uniform(0.1, 3.0, 200)
    center, scale = column_scales(X, w)
    mean, std = _weighted_moments(X, w)
    np.testing.assert_allclose(center, mean, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(scale, std, rtol=1e-12)
    center, scale = column_scales(X)  # no weights: every row counts once
    np.testing.assert_allclose(center, X.mean(axis=0), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(scale, X.std(axis=0), rtol=1e-12)


def test_column_scales_are_the_same_bits_in_any_row_order_and_for_repeated_rows():
    # values of two decimals, many ties: the standardised values are the kernel leaves'
    # bump centres, and a value midway between two flipped with the last bit of a scale
    rng = np.random.default_rng(3)
    X = np.round(rng.normal(13.0, 0.8, size=(150, 2)), 2)
    X[rng.random(X.shape) < 0.1] = np.nan
    w = rng.integers(0, 4, size=150)
    order = rng.permutation(150)
    reference = column_scales(X, w.astype(float))
    for other in (
        column_scales(X[order], w[order].astype(float)),
        column_scales(np.repeat(X, w, axis=0)),
    ):
        for a, b in zip(reference, other):
            np.testing.assert_array_equal(a, b)


def test_column_scales_ignore_nan_and_zero_weight_rows():
    rng = np.random.default_rng(1)
    X = rng.normal(2.0, 3.0, size=(100, 2))
    w = rng.uniform(0.5, 2.0, 100)
    w[:10] = 0.0
    X[:10] = 1e6  # rows of zero weight: far off, and left out
    X[10:20, 0] = np.nan
    X[30:45, 1] = np.nan
    center, scale = column_scales(X, w)
    for j in range(2):
        keep = ~np.isnan(X[:, j]) & (w > 0)
        mean, std = _weighted_moments(X[keep, j], w[keep])
        assert center[j] == pytest.approx(mean, rel=1e-12)
        assert scale[j] == pytest.approx(std, rel=1e-12)


def test_column_scales_give_scale_one_to_a_constant_or_empty_column():
    X = np.array(
        [
            [5.0, np.nan, 0.0, -2.0, 1.0],
            [5.0, np.nan, 0.0, -2.0, 7.0],
            [5.0, np.nan, np.nan, -2.0 * (1 + 1e-15), 1.0],
        ]
    )
    w = np.array([1.0, 0.0, 2.0])  # column 4 is constant on the rows of positive weight
    center, scale = column_scales(X, w)
    np.testing.assert_array_equal(scale, np.ones(5))
    np.testing.assert_allclose(center, [5.0, 0.0, 0.0, -2.0, 1.0], rtol=1e-14)
    assert np.all(np.isfinite(center))
    # no entry observed in a row of positive weight: an empty column
    center, scale = column_scales(np.array([[1.0, np.nan], [2.0, 3.0]]), np.zeros(2))
    assert center.tolist() == [0.0, 0.0] and scale.tolist() == [1.0, 1.0]


@pytest.mark.parametrize("magnitude", [1e-200, 1e200])
def test_column_scales_are_finite_and_proportional_at_any_magnitude(magnitude):
    rng = np.random.default_rng(2)
    X = rng.normal([1.0, 0.0, -4.0], [1.0, 2.0, 0.5], size=(300, 3))
    w = rng.uniform(0.5, 2.0, 300)
    ref_center, ref_scale = column_scales(X, w)
    center, scale = column_scales(X * magnitude, w)
    assert np.all(np.isfinite(center)) and np.all(np.isfinite(scale)) and np.all(scale > 0)
    np.testing.assert_allclose(center / magnitude, ref_center, rtol=1e-12)
    np.testing.assert_allclose(scale / magnitude, ref_scale, rtol=1e-12)


# ---------------------------------------------------------------- unit: MixedEncoder
def _mixed_rows():
    """Column 0 continuous, column 1 categorical (a missing entry), column 2 continuous
    (missing entries as NaN and None)."""
    return np.array(
        [
            [1.0, "b", 10],
            [2.0, "a", 20],
            [4.0, None, np.nan],
            [5.0, "b", None],
            [3.0, "c", 40.0],
            [7.0, "a", 70],
        ],
        dtype=object,
    )


def test_mixed_encoder_standardises_the_continuous_columns():
    X = _mixed_rows()
    enc = MixedEncoder()
    Z = enc.fit_transform(X, np.array([False, True, False]))
    raw = np.array(X[:, [0, 2]], dtype=float)  # None -> NaN
    np.testing.assert_allclose(np.nanmean(Z[:, [0, 2]], axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(np.nanstd(Z[:, [0, 2]], axis=0), 1.0, rtol=1e-12)
    np.testing.assert_array_equal(np.isnan(Z[:, 2]), [False, False, True, True, False, False])
    np.testing.assert_allclose(enc.center_, [np.nanmean(raw[:, 0]), 0.0, np.nanmean(raw[:, 1])])
    np.testing.assert_allclose(enc.scale_, [np.nanstd(raw[:, 0]), 1.0, np.nanstd(raw[:, 1])])
    # transform repeats the fitted standardisation, on the fit rows and on new ones
    np.testing.assert_allclose(enc.transform(X), Z, equal_nan=True)
    new = np.array([[enc.center_[0], "a", enc.center_[2] + enc.scale_[2]]], dtype=object)
    np.testing.assert_allclose(enc.transform(new), [[0.0, 0.0, 1.0]], atol=1e-12)


def test_mixed_encoder_codes_the_categorical_columns():
    X = _mixed_rows()
    enc = MixedEncoder()
    Z = enc.fit_transform(X, np.array([False, True, False]))
    assert enc.is_categorical_.tolist() == [False, True, False]
    assert enc.categories_ == [None, ["a", "b", "c"], None]
    assert enc.n_categories_.tolist() == [0, 3, 0]
    assert enc.center_[1] == 0.0 and enc.scale_[1] == 1.0
    np.testing.assert_array_equal(Z[:, 1], [1, 0, np.nan, 1, 2, 0])
    new = np.array([[1.0, "zz", 10], [1.0, "c", 10], [1.0, None, 10], [1.0, "a", 10]], dtype=object)
    np.testing.assert_array_equal(enc.transform(new)[:, 1], [UNSEEN, 2, np.nan, 0])
    assert UNSEEN == -2


def test_mixed_encoder_rows_of_zero_weight_add_no_category():
    X = _mixed_rows()
    X[5] = [1000.0, "zz", 1000.0]
    w = np.array([1.0, 2.0, 1.0, 1.0, 0.5, 0.0])
    enc = MixedEncoder()
    Z = enc.fit_transform(X, np.array([False, True, False]), sample_weight=w)
    assert enc.categories_[1] == ["a", "b", "c"] and enc.n_categories_[1] == 3
    assert Z[5, 1] == UNSEEN  # the row of weight zero holds a category not learned
    # nor do those rows move the standardisation: weighted mean 0, std 1 on the others
    for j in (0, 2):
        keep = (w > 0) & ~np.isnan(Z[:, j])
        mean, std = _weighted_moments(Z[keep, j], w[keep])
        assert abs(mean) < 1e-12 and std == pytest.approx(1.0, rel=1e-12)
    assert enc.center_[0] == pytest.approx(np.average([1.0, 2.0, 4.0, 5.0, 3.0], weights=w[:5]))


def test_mixed_encoder_names_a_non_number_in_a_continuous_column():
    X = np.array([[1.0, 2.0], [2.0, "x"], [3.0, None]], dtype=object)
    enc = MixedEncoder(owner="KernelLatentTree")
    with pytest.raises(TypeError, match="KernelLatentTree: column 'v' .* continuous but holds 'x'"):
        enc.fit_transform(X, np.array([False, False]), names=["u", "v"])
    with pytest.raises(TypeError, match="column 1 is modelled as continuous but holds 'x'"):
        MixedEncoder().fit_transform(X, np.array([False, False]))
    fitted = MixedEncoder()
    fitted.fit_transform(X[[0, 2]], np.array([False, False]), names=["u", "v"])
    with pytest.raises(TypeError, match="column 'v' is modelled as continuous but holds 'x'"):
        fitted.transform(X)


def test_mixed_encoder_refuses_a_continuous_looking_categorical_column():
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.integers(0, 3, 300), rng.normal(size=300)]).astype(object)
    declared = MixedEncoder([1], owner="KernelLatentTree")
    with pytest.raises(ValueError, match="column 'height' is modelled as categorical") as info:
        declared.fit_transform(X, np.array([False, True]), names=["a", "height"])
    message = str(info.value)
    assert message.startswith("KernelLatentTree: ")
    assert "looks continuous (300 distinct values, 300 of them fractional)" in message
    assert "leave it out of categorical_features" in message
    # from the dtypes: a label among the numbers made it categorical, and is quoted
    X[7, 1] = "x"
    with pytest.raises(ValueError, match="column 1 is modelled as categorical") as info:
        MixedEncoder().fit_transform(X, categorical_mask(X))
    assert "'x'" in str(info.value) and "convert it to numbers" in str(info.value)


def test_a_found_category_is_not_reported_as_retyped():
    # half the entries unseen ("zz"), the other half a fitted category: no type mismatch
    enc = CategoricalEncoder()
    enc.fit_transform(np.array([["u"], ["v"], ["u"]], dtype=object))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        codes = enc.transform(np.array([["u"], ["zz"]], dtype=object))
    assert codes[0, 0] == 0 and codes[0, 1] == UNSEEN


def test_mixed_encoder_warnings_name_the_column_by_its_position_in_x():
    rng = np.random.RandomState(0)
    X = np.empty((200, 4), dtype=object)
    X[:, :3] = rng.standard_normal((200, 3))
    X[:, 3] = [f"id{i}" for i in range(200)]  # one value a row: an identifier
    mask = np.array([False, False, False, True])
    with pytest.warns(UserWarning, match="'3'"):
        MixedEncoder(owner="KernelLatentTree").fit_transform(X, mask)


def test_a_continuous_column_of_few_numbers_is_named_in_a_warning():
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.normal(size=400), rng.integers(0, 6, 400).astype(float)])
    with pytest.warns(
        UserWarning, match="column 1 is modelled as continuous but holds only 6"
    ) as w:
        KernelLatentTree(max_iter=5).fit(X)
    assert any(r.filename == __file__ for r in w)  # the warning names the caller's line
    # declared categorical, or with many distinct numbers, it is not warned about
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        warnings.simplefilter("ignore", ConvergenceWarning)
        KernelLatentTree(max_iter=5, categorical_features=[1]).fit(X.astype(object))
        X[:, 1] += rng.normal(scale=0.1, size=400)
        KernelLatentTree(max_iter=5).fit(X)


@pytest.mark.parametrize(
    "make", [lambda: KernelLatentTree(hidden="gaussian"), lambda: GaussianLatentTree()]
)
def test_the_few_numbers_warning_holds_for_the_gaussian_models(make):
    # a Gaussian density on a column of few numbers is as degenerate as bumps on it
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"x": rng.normal(size=300), "rating": rng.integers(0, 4, 300) * 1.0})
    est = make()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        est.fit(X)
    about = [str(r.message) for r in w if "distinct numbers" in str(r.message)]
    assert len(about) == 1, about  # once, in this estimator's name
    assert about[0].startswith(f"{type(est).__name__}: column 'rating'")


def test_a_column_of_many_rare_values_warns_and_one_of_few_does_not():
    values = np.array([f"z{v:04d}" for v in np.arange(600) % 150], dtype=object)
    X = np.column_stack([values, np.arange(600) % 3])
    with pytest.warns(UserWarning, match=r"Column 0 has 150 distinct values in 600 rows \(4.0"):
        CategoricalEncoder().fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        CategoricalEncoder().fit(np.repeat(values[:150], 5)[:, None])  # 5 rows a value


def test_an_identifier_column_warning_names_the_callers_line():
    rng = np.random.default_rng(0)
    X = np.column_stack([np.arange(300), rng.integers(0, 3, 300)])
    with pytest.warns(UserWarning, match="row identifier") as w:
        SpectralLatentTree(max_iter=5).fit(X)
    assert any(r.filename == __file__ for r in w)


ESTIMATORS = [
    SpectralLatentTree,
    HierarchicalTensorLTM,
    QuartetTreeLearner,
    LatentTreeEM,
    KernelLatentTree,
]


# ---------------------------------------------------------------- duplicated names
@pytest.mark.parametrize("Est", ESTIMATORS)
def test_duplicated_column_names_refused(Est):
    X = pd.DataFrame(np.random.default_rng(0).integers(0, 2, (50, 3)), columns=list("aab"))
    with pytest.raises(ValueError, match=re.escape("duplicated column names ['a']")):
        Est().fit(X)


def test_duplicated_column_names_refused_in_partial_fit_and_classifier():
    X = pd.DataFrame(np.random.default_rng(0).integers(0, 2, (50, 4)), columns=list("abcb"))
    with pytest.raises(ValueError, match=re.escape("duplicated column names ['b']")):
        SpectralLatentTree().partial_fit(X)
    with pytest.raises(ValueError, match=re.escape("duplicated column names ['b']")):
        LatentTreeClassifier().fit(X, np.arange(50) % 2)


def test_numbers_read_as_text_are_refused_as_continuous():
    # what read_csv(dtype=str) gives: without the check, a category per value
    X = np.round(np.random.default_rng(0).normal(size=(300, 3)), 3).astype(str)
    with pytest.raises(ValueError, match="Column 0 looks continuous.*pandas.to_numeric"):
        SpectralLatentTree().fit(X)
    # whole numbers as text are categories
    labels = np.random.default_rng(0).integers(0, 3, (300, 3)).astype(str)
    SpectralLatentTree(2, max_iter=5).fit(labels)


@pytest.mark.parametrize(
    "column",
    [pd.Categorical([0, 1, None] * 20, categories=[0, 1]), pd.array([0, 1, None] * 20, "Int64")],
)
def test_missing_entries_of_pandas_integer_columns_stay_missing(column):
    # beside integer columns, the frame's NumPy form casts such a missing entry to -2**63
    X = pd.DataFrame(np.random.default_rng(0).integers(0, 3, (60, 3)), columns=list("abc"))
    X["d"] = column
    est = SpectralLatentTree(2, structure="clnj", random_state=0).fit(X)
    assert list(est.categories_[3]) == [0, 1]
    dropped = SpectralLatentTree(2, structure="clnj", random_state=0).fit(X.astype(object))
    np.testing.assert_allclose(est.score_samples(X), dropped.score_samples(X.astype(object)))


def test_many_whole_numbers_warn_that_each_is_a_category():
    amounts = np.arange(60).repeat(3).reshape(-1, 1) * 100  # 60 amounts, 3 rows each
    with pytest.warns(UserWarning, match="60 distinct whole numbers"):
        CategoricalEncoder().fit(amounts)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        CategoricalEncoder().fit(amounts[: 50 * 3])  # at most MAX_FLOAT_CATEGORIES: quiet
        CategoricalEncoder([list(range(0, 6000, 100))]).fit(amounts)  # given: codes
        CategoricalEncoder().fit(np.array([f"c{v}" for v in amounts.ravel()])[:, None])
