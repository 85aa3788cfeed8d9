"""LatentTreeClassifier: one latent tree per class, the class posterior by Bayes' rule;
its scikit-learn conventions, class models, automatic choices and mixed or continuous data."""

import pickle
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.special import logsumexp
from sklearn.base import clone, is_classifier
from sklearn.linear_model import LogisticRegression
from sklearn.mixture import GaussianMixture
from sklearn.model_selection import StratifiedKFold, cross_val_score
from sklearn.naive_bayes import GaussianNB
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder
from test_reliability import sample

from ltm_sklearn import (
    GaussianLatentTree,
    KernelLatentTree,
    LatentTreeClassifier,
    QuartetTreeLearner,
    SpectralLatentTree,
)
from ltm_sklearn._estimators.base import BaseLatentTree
from ltm_sklearn.datasets import (
    GaussianLatentTreeModel,
    GaussianLeafTreeModel,
    LatentTreeModel,
    balanced_binary_tree,
    load_table,
    random_binary_tree,
)


# ---------------------------------------------- fit/predict and scikit-learn conventions
def two_class_data(n_per_class=3000, seed=0):
    tree = balanced_binary_tree(8)
    a = LatentTreeModel.random(tree, 2, 3, noise=0.6, random_state=seed)
    b = LatentTreeModel.random(tree, 2, 3, noise=0.6, random_state=seed + 1)
    X = np.vstack([a.sample(n_per_class, random_state=1), b.sample(n_per_class, random_state=2)])
    y = np.repeat(["a", "b"], n_per_class)
    return X, y, tree, (a, b)


def test_classifier_follows_scikit_learn_conventions():
    X, y, tree, _ = two_class_data(500)
    clf = LatentTreeClassifier(SpectralLatentTree(2, tree=tree), calibrate=False).fit(X, y)
    assert is_classifier(clf) and not is_classifier(SpectralLatentTree())
    assert SpectralLatentTree().__sklearn_tags__().estimator_type == "density_estimator"
    # score is the accuracy, so cross_val_score without scoring= measures accuracy
    assert clf.score(X, y) == pytest.approx(np.mean(clf.predict(X) == y))
    # the density estimators' predict_proba is the latent-class posterior (not a classifier)
    assert SpectralLatentTree(2).fit(X).predict_proba(X[:3]).shape == (3, 2)
    # one encoding of the categories for every class model
    assert all(e.categories_ == clf.estimators_[0].categories_ for e in clf.estimators_)
    with pytest.raises(ValueError, match="missing labels"):
        clf.fit(X[:4], np.array(["a", None, "b", "a"], dtype=object))


@pytest.mark.slow
def test_classifier_roc_auc_and_scorers():
    X, y, tree, (a, b) = two_class_data()
    clf = LatentTreeClassifier(SpectralLatentTree(2, tree=tree, random_state=0))
    clf.fit(X, y)
    np.testing.assert_array_equal(clf.classes_, ["a", "b"])
    proba = clf.predict_proba(X[:50])
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    auc = cross_val_score(clf, X, y, scoring="roc_auc", cv=3)
    # Bayes-optimal AUC with the true models on the same rows, for reference
    lr = a.log_likelihood(X) - b.log_likelihood(X)
    from sklearn.metrics import roc_auc_score

    bayes = roc_auc_score(y == "a", lr)
    assert auc.mean() > bayes - 0.03
    for scoring in ("accuracy", "neg_log_loss"):
        assert np.all(np.isfinite(cross_val_score(clf, X, y, scoring=scoring, cv=3)))


def test_pickle_round_trip_gives_identical_scores():
    X, y, tree, _ = two_class_data(500)
    clf = LatentTreeClassifier(SpectralLatentTree(2, random_state=0), calibrate=False).fit(X, y)
    back = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(back.predict_proba(X), clf.predict_proba(X))
    est = clf.estimators_[0]
    np.testing.assert_array_equal(
        pickle.loads(pickle.dumps(est)).score_samples(X), est.score_samples(X)
    )
    assert repr(clone(clf)) == repr(clf)


def test_classes_share_categories_and_normalisation():
    # a category seen in one class only is a known category of every class model
    X = np.array([["x", "u"], ["y", "u"], ["x", "v"], ["z", "v"], ["y", "v"], ["x", "u"]] * 20)
    y = np.repeat([0, 1], 60)
    clf = LatentTreeClassifier(SpectralLatentTree(1)).fit(X, y)
    grid = np.array([[a, b] for a in "xyz" for b in "uv"])
    for est in clf.estimators_:
        assert est.categories_ == [["x", "y", "z"], ["u", "v"]]
        assert np.exp(est.score_samples(grid)).sum() == pytest.approx(1.0, abs=1e-12)


# ---------------------------------------------------------------------------- bad labels
def test_missing_labels_are_named():
    _, X = sample(20)
    y = np.array(["a", "b"] * 9 + [None, "a"], dtype=object)
    with pytest.raises(ValueError, match="1 missing labels"):
        LatentTreeClassifier().fit(X, y)


# ---------------------------------------------- n_hidden_states='auto' and small classes
@pytest.mark.slow
def test_classifier_auto_is_never_worse_than_k_equal_one_where_that_is_better():
    """Columns independent given the class: k' = 1 is the right model; the choice must
    not lose held-out log-loss to it."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 3000)
    p = np.where(y[:, None] == 1, 0.7, 0.3) * np.ones((1, 6))
    X = (rng.random((3000, 6)) < p).astype(int)
    X_test_y = rng.integers(0, 2, 2000)
    X_test = (rng.random((2000, 6)) < np.where(X_test_y[:, None] == 1, 0.7, 0.3)).astype(int)

    def log_loss(clf):
        proba = clf.predict_proba(X_test)
        return -np.mean(np.log(proba[np.arange(len(X_test_y)), X_test_y]))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        auto = LatentTreeClassifier(n_hidden_states="auto", random_state=0).fit(X, y)
        one = LatentTreeClassifier(n_hidden_states=1).fit(X, y)
    assert auto.n_hidden_states_ in auto.n_hidden_states_scores_
    assert log_loss(auto) <= log_loss(one) + 0.005


@pytest.mark.slow
def test_classifier_auto_chooses_naive_bayes_or_a_latent_tree_by_cross_validated_log_loss():
    """Few rows, columns independent given the class: the independence candidate wins and
    the classifier is CategoricalNB (add-one smoothing) to rounding. Columns that depend
    on each other within a class (a latent tree per class): a latent candidate wins and
    beats naive Bayes on held-out log-loss."""
    from sklearn.naive_bayes import CategoricalNB

    # naive Bayes leads k' = 2 out of fold on these 150 rows by 0.005 nats per row; on
    # 200 such rows the two came within 0.0001 of each other, either side with EM's start
    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, 150)
    X = (rng.random((150, 6)) < np.where(y[:, None] == 1, 0.65, 0.35)).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = LatentTreeClassifier(model="per_class", n_hidden_states="auto", random_state=0).fit(
            X, y
        )
    assert clf.class_params_ == {"structure": "star", "n_hidden_states": 1, "alpha": 1.0}
    assert clf.independence_score_ <= min(clf.n_hidden_states_scores_.values())
    nb = CategoricalNB(alpha=1.0, min_categories=2).fit(X, y)
    np.testing.assert_allclose(clf.predict_proba(X), nb.predict_proba(X), atol=1e-10)

    tree = balanced_binary_tree(8)
    models = [LatentTreeModel.random(tree, 2, 3, noise=0.3, random_state=s) for s in (0, 1)]
    X = np.vstack([m.sample(1500, random_state=s) for s, m in enumerate(models)])
    y = np.repeat([0, 1], 1500)
    X_test = np.vstack([m.sample(2000, random_state=10 + s) for s, m in enumerate(models)])
    y_test = np.repeat([0, 1], 2000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = LatentTreeClassifier(model="per_class", n_hidden_states="auto", random_state=0).fit(
            X, y
        )
    assert clf.class_params_.get("structure") != "star"
    assert clf.independence_score_ > min(clf.n_hidden_states_scores_.values())
    nb = CategoricalNB(alpha=1.0).fit(X, y)

    def loss(proba):
        return -np.mean(np.log(proba[np.arange(len(y_test)), y_test]))

    assert loss(clf.predict_proba(X_test)) < loss(nb.predict_proba(X_test)) - 0.01


def test_classifier_independence_candidate_smooths_categories_only():
    """Add-one smoothing is CategoricalNB's model of category tables; a kernel model's
    ``alpha`` also smooths its bump weights and is left as the user set it."""
    clf = LatentTreeClassifier(n_hidden_states="auto")
    discrete = clf._independence_candidate(SpectralLatentTree(alpha=0.3))
    kernel = clf._independence_candidate(KernelLatentTree(structure="auto", alpha=0.3))
    assert discrete == {"structure": "star", "n_hidden_states": 1, "alpha": 1.0}
    assert kernel == {"structure": "star", "n_hidden_states": 1}
    assert clf._independence_candidate(SpectralLatentTree(structure="me")) is None


def test_classifier_auto_keeps_tiny_classes_in_training_and_refuses_too_few_rows():
    X = np.random.default_rng(0).integers(0, 2, (40, 4))
    y = np.r_[np.zeros(37), np.ones(3)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = LatentTreeClassifier(n_hidden_states="auto", random_state=0).fit(X, y)
    # a class of 3 rows gets the independence model beyond k' = 3
    tiny = clf.estimators_[1]
    assert clf.n_hidden_states_ <= 3 or tiny.structure_ == "star"
    assert np.allclose(clf.predict_proba(X).sum(axis=1), 1)
    with pytest.raises(ValueError, match="at least 10 rows in classes"):
        LatentTreeClassifier(n_hidden_states="auto").fit(X[:12], np.r_[np.zeros(8), np.ones(4)])


# ------------------------------------------------------------- mixed and continuous data
def test_classifier_on_a_mixed_table():
    X, y = load_table("australian")
    clf = LatentTreeClassifier(KernelLatentTree(2, max_iter=30, random_state=0), calibrate=False)
    clf.fit(X.iloc[:500], y[:500])
    assert clf.model_ == "pooled"  # the joint model declares the class categorical
    for est in clf.estimators_:  # one encoding for all classes
        assert est.is_categorical_.tolist() == clf.estimators_[0].is_categorical_.tolist()
        for a, b in zip(est.categories_, clf.estimators_[0].categories_):
            assert (a is None and b is None) or list(a) == list(b)
    proba = clf.predict_proba(X.iloc[500:])
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert clf.score(X.iloc[500:], y[500:]) > 0.75


@pytest.mark.slow
def test_classifier_close_to_bayes_and_above_gaussian_nb():
    tree = balanced_binary_tree(8)
    a = GaussianLeafTreeModel.random(tree, 2, random_state=3)
    b = GaussianLeafTreeModel.random(tree, 2, random_state=4)

    def data(n, seed):
        X = np.vstack([a.sample(n, random_state=seed), b.sample(n, random_state=seed + 100)])
        return X, np.repeat(["a", "b"], n)

    X, y = data(3000, 0)
    X_test, y_test = data(2000, 1)
    bayes_pred = np.where(b.log_likelihood(X_test) > a.log_likelihood(X_test), "b", "a")
    bayes = np.mean(bayes_pred == y_test)
    clf = LatentTreeClassifier(KernelLatentTree(2, bandwidth_scale=0.5), shared_tree=True)
    clf.fit(X, y)
    proba = clf.predict_proba(X_test)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    acc = np.mean(clf.predict(X_test) == y_test)
    assert acc > bayes - 0.03
    assert acc > GaussianNB().fit(X, y).score(X_test, y_test) + 0.03


# -------------------------------------- the form of the hidden variables (hidden='auto')
@pytest.mark.slow
def test_classifier_chooses_the_form_by_log_loss():
    tree = balanced_binary_tree(6)
    a = GaussianLatentTreeModel.random(tree, random_state=0)
    b = GaussianLatentTreeModel.random(tree, random_state=1)
    X = np.vstack([a.sample(300, random_state=2), b.sample(300, random_state=3)])
    y = np.repeat([0, 1], 300)
    clf = LatentTreeClassifier(
        KernelLatentTree(hidden="auto", random_state=0),
        model="per_class",
        shared_tree=True,
        random_state=0,
    ).fit(X, y)
    # linear-Gaussian classes: the Gaussian form classifies better out of fold
    assert clf.hidden_ == "gaussian"
    assert clf.hidden_scores_["gaussian"] < clf.hidden_scores_["discrete"]
    assert [est.hidden_ for est in clf.estimators_] == ["gaussian", "gaussian"]
    np.testing.assert_allclose(clf.predict_proba(X[:10]).sum(axis=1), 1.0)
    # the class models are the Gaussian form fitted directly on each class, one tree
    same = LatentTreeClassifier(
        KernelLatentTree(hidden="gaussian", random_state=0),
        model="per_class",
        shared_tree=True,
        random_state=0,
    ).fit(X, y)
    np.testing.assert_allclose(clf.predict_proba(X), same.predict_proba(X))
    bayes = np.where(b.log_likelihood(X) > a.log_likelihood(X), 1, 0)
    assert clf.score(X, y) > np.mean(bayes == y) - 0.03


def test_classifier_keeps_the_discrete_form_on_mixed_tables():
    rng = np.random.default_rng(0)
    y = np.repeat([0, 1], 100)
    X = pd.DataFrame(
        {
            "x": rng.normal(size=200) + y,
            "colour": pd.Categorical(np.where(rng.random(200) < 0.3 + 0.4 * y, "red", "blue")),
        }
    )
    clf = LatentTreeClassifier(KernelLatentTree(hidden="auto", random_state=0)).fit(X, y)
    assert not hasattr(clf, "hidden_")
    assert all(est.hidden_ == "discrete" for est in clf.estimators_)


def test_classifier_form_choice_keeps_the_discrete_form_on_too_few_rows():
    # as the estimator itself: under 10 rows to hold out, the discrete form
    X = np.random.default_rng(0).normal(size=(8, 3))
    y = np.repeat([0, 1], 4)
    clf = LatentTreeClassifier(KernelLatentTree(hidden="auto", random_state=0)).fit(X, y)
    assert all(est.hidden_ == "discrete" for est in clf.estimators_)
    assert not hasattr(clf, "hidden_")


# ---------------------------------------------- the joint model, the pool, small classes
def test_model_auto_pools_a_discrete_estimator_and_keeps_per_class_otherwise():
    X, y, *_ = two_class_data(200)
    assert LatentTreeClassifier(random_state=0, calibrate=False).fit(X, y).model_ == "pooled"
    given = SpectralLatentTree(2, tree=balanced_binary_tree(8))
    assert LatentTreeClassifier(given, calibrate=False).fit(X, y).model_ == "per_class"
    with pytest.raises(ValueError, match="given tree"):
        LatentTreeClassifier(given, model="joint").fit(X, y)
    categories = [sorted(set(X[:, j])) for j in range(X.shape[1])]
    listed = SpectralLatentTree(2, categories=categories)
    assert LatentTreeClassifier(listed, calibrate=False).fit(X, y).model_ == "per_class"
    # a kernel model: the class declared categorical in its joint model
    rng = np.random.default_rng(0)
    numbers = rng.normal(size=(120, 3)) + np.repeat([0.0, 1.0], 60)[:, None]
    labels = np.repeat(["a", "b"], 60)
    estimator = KernelLatentTree(2, structure="chow_liu", hidden="discrete", random_state=0)
    kernel = LatentTreeClassifier(estimator, calibrate=False).fit(numbers, labels)
    assert kernel.model_ == "pooled"
    assert kernel.joint_estimator_.is_categorical_.tolist() == [False, False, False, True]
    np.testing.assert_allclose(kernel.predict_proba(numbers).sum(axis=1), 1.0)
    for fixed in (KernelLatentTree(hidden="gaussian"), KernelLatentTree(bandwidth=[1.0] * 8)):
        assert LatentTreeClassifier(fixed)._resolve_model(fixed) == "per_class"
        with pytest.raises(ValueError, match="per_class"):
            LatentTreeClassifier(fixed, model="pooled").fit(X.astype(float), y)
    with pytest.raises(ValueError, match="an estimator of this package that holds the class"):
        LatentTreeClassifier(GaussianMixture(1), model="joint").fit(X.astype(float), y)


def test_pool_is_its_weight_and_temperature_applied_to_the_two_models():
    """``P(c | x) = w P_T(c | x) + (1 - w) P_joint(c | x)`` with ``P_T ∝ P(c) p(x |
    c)^(1 / T)``: the mean of the two models' posteriors with ``calibrate=False``, the
    fitted ``pool_weight_`` and ``temperature_`` otherwise; rows sum to 1."""
    X, y, *_ = two_class_data(200)
    per_class = LatentTreeClassifier(model="per_class", random_state=0, calibrate=False).fit(X, y)
    joint = LatentTreeClassifier(model="joint", random_state=0).fit(X, y)
    assert not hasattr(per_class, "joint_estimator_") and not hasattr(joint, "estimators_")
    # the joint model's k' is the classifier's (a number given, or its choice)
    assert not hasattr(joint, "n_hidden_states_")  # n_hidden_states=None: the estimator's
    auto = LatentTreeClassifier(model="joint", n_hidden_states="auto", random_state=0).fit(X, y)
    assert auto.n_hidden_states_ == auto.joint_estimator_.n_hidden_states_
    mean = LatentTreeClassifier(random_state=0, calibrate=False).fit(X, y)
    assert (mean.pool_weight_, mean.temperature_) == (0.5, 1.0)
    expected = (per_class.predict_proba(X[:50]) + joint.predict_proba(X[:50])) / 2
    np.testing.assert_allclose(mean.predict_proba(X[:50]), expected, rtol=1e-10)

    pooled = LatentTreeClassifier(random_state=0).fit(X, y)
    w, T = pooled.pool_weight_, pooled.temperature_
    assert 0.0 <= w <= 1.0 and T >= 1.0
    assert set(pooled.calibration_scores_) == {"default", "chosen"}
    z = np.column_stack([m.score_samples(X[:50]) for m in pooled.estimators_]) / T
    z += np.log(pooled.class_prior_)
    per = np.exp(z - logsumexp(z, axis=1, keepdims=True))
    expected = w * per + (1 - w) * joint.predict_proba(X[:50])
    np.testing.assert_allclose(pooled.predict_proba(X[:50]), expected, rtol=1e-10)
    for model in (mean, pooled):
        np.testing.assert_allclose(model.predict_proba(X).sum(axis=1), 1.0)


def test_joint_model_is_the_exact_conditional_of_one_tree_and_near_bayes():
    # the class is one leaf of a latent tree: the joint model's posterior approaches the
    # true conditional P(class | other leaves), computed by brute force from the truth
    truth = LatentTreeModel.random(balanced_binary_tree(8), 2, 3, noise=0.3, random_state=4)
    data = truth.sample(20_000, random_state=0)
    test = truth.sample(2_000, random_state=1)
    X, y = data[:, :7], data[:, 7]
    clf = LatentTreeClassifier(model="joint", random_state=0).fit(X, y)
    lls = np.column_stack(
        [
            truth.log_likelihood(np.column_stack([test[:, :7], np.full(len(test), v)]))
            for v in range(3)
        ]
    )
    bayes = np.exp(lls - lls.max(axis=1, keepdims=True))
    bayes /= bayes.sum(axis=1, keepdims=True)
    rows = np.arange(len(test))
    loss_bayes = -np.log(bayes[rows, test[:, 7]]).mean()
    loss = -np.log(clf.predict_proba(test[:, :7])[rows, test[:, 7]]).mean()
    assert loss - loss_bayes < 0.02, (loss, loss_bayes)
    # its posterior is the joint density's conditional, with the class last
    est = clf.joint_estimator_
    cond = est.conditional_proba(np.column_stack([test[:5, :7], np.zeros(5, int)]), target=7)
    np.testing.assert_allclose(clf.predict_proba(test[:5, :7]), cond)


def test_joint_model_names_its_class_column_apart_from_the_columns():
    X, y, *_ = two_class_data(300)
    df = pd.DataFrame(X.astype(str), columns=[f"c{j}" for j in range(7)] + ["__class__"])
    clf = LatentTreeClassifier(model="joint", random_state=0).fit(df, y)
    names = list(clf.joint_estimator_.feature_names_in_)
    assert names[:8] == list(df.columns) and names[8] not in df.columns
    np.testing.assert_allclose(clf.predict_proba(df.iloc[:20]).sum(axis=1), 1.0)


def test_a_class_too_small_for_its_model_gets_the_independence_model():
    X, y, *_ = two_class_data(300)
    y = y.astype(object)
    y[7] = "lonely"  # one row: fewer than the k' = 2 of the default class model
    clf = LatentTreeClassifier(model="per_class", random_state=0).fit(X, y)
    lonely = clf.estimators_[list(clf.classes_).index("lonely")]
    assert lonely.structure_ == "star" and lonely.n_hidden_states_ == 1
    np.testing.assert_allclose(clf.predict_proba(X[:20]).sum(axis=1), 1.0)
    # with a fixed structure, that structure with the states its rows estimate, named
    fixed = SpectralLatentTree(2, structure="hclt")
    with pytest.warns(UserWarning, match="classes 'lonely' \\(1 rows\\)"):
        clf = LatentTreeClassifier(fixed, model="per_class").fit(X, y)
    lonely = clf.estimators_[list(clf.classes_).index("lonely")]
    assert lonely.structure_ == "hclt" and lonely.n_hidden_states_ == 1


@pytest.mark.slow  # about 6 s: the auto choices' inner folds
def test_classifier_auto_is_not_held_down_by_a_tiny_class():
    # a class of one row used to cap k' at 1 for every class; it now gets the
    # independence model when k' exceeds its rows, and k' is tried beyond it
    X, y, *_ = two_class_data(300)
    X = np.vstack([X, X[:1]])
    y = np.r_[y, ["tiny"]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = LatentTreeClassifier(model="per_class", n_hidden_states="auto", random_state=0)
        clf.fit(X, y)
    assert 2 in clf.n_hidden_states_scores_
    tiny = clf.estimators_[list(clf.classes_).index("tiny")]
    assert tiny.n_hidden_states_ == 1
    np.testing.assert_allclose(clf.predict_proba(X[:20]).sum(axis=1), 1.0)


@pytest.mark.slow  # about 6 s: the auto choices' inner folds
def test_model_select_keeps_the_model_of_lowest_out_of_fold_log_loss():
    X, y, *_ = two_class_data(300)
    clf = LatentTreeClassifier(model="select", random_state=0).fit(X, y)
    scores = clf.model_scores_
    assert set(scores) == {"pooled", "per_class", "joint"}
    assert scores[clf.model_] == min(scores.values())
    # the pool's out-of-fold loss is at most the mean of the other two's (log-loss is
    # convex in the posterior)
    assert scores["pooled"] <= (scores["per_class"] + scores["joint"]) / 2 + 1e-12
    same = LatentTreeClassifier(model=clf.model_, random_state=0).fit(X, y)
    np.testing.assert_allclose(clf.predict_proba(X[:30]), same.predict_proba(X[:30]))


@pytest.mark.slow
def test_classifier_auto_keeps_the_class_models_of_its_choice_and_their_warnings():
    """The class models fitted on every row during the choice are the final ones: each
    equals a fit of its class's rows with the chosen k', and the warnings of those fits
    reach the user's line. The folds' fits use the structure each class model chose."""
    from sklearn.exceptions import ConvergenceWarning

    # rows enough that k' = 2, whose fits stop at max_iter, wins (on 500 rows a class,
    # k' = 1 led after four EM iterations from the tensor start)
    X, y, _, _ = two_class_data(n_per_class=1000)
    base = SpectralLatentTree(max_iter=4, n_members=1, random_state=0)
    clf = LatentTreeClassifier(base, model="per_class", n_hidden_states="auto", n_jobs=1)
    with pytest.warns(ConvergenceWarning) as record:
        clf.fit(X, y)
    assert {w.filename for w in record if w.category is ConvergenceWarning} == {__file__}
    assert "structure" not in clf.class_params_
    for label, model in zip(clf.classes_, clf.estimators_):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            again = clone(base).set_params(**clf.class_params_).fit(X[y == label])
        assert model.structure_ == again.structure_
        np.testing.assert_array_equal(model.score_samples(X), again.score_samples(X))


def test_trial_fits_skip_the_raw_estimate_and_the_final_models_keep_it(monkeypatch):
    """The classifier's trial fits (scored and dropped) skip the raw estimate, which only
    a reader of a final model uses: their explicit models are those of a full fit. The
    final class models and the joint model keep it."""
    from ltm_sklearn._estimators import classifier as classifier_module

    X, y, tree, _ = two_class_data(n_per_class=300)
    base = SpectralLatentTree(2, tree=tree, random_state=0)
    full = clone(base).fit(X[y == "a"])
    trial = classifier_module._fit_class_model(clone(base), X[y == "a"], None, "a", trial=True)
    assert hasattr(full, "raw_estimate_") and not hasattr(trial, "raw_estimate_")
    np.testing.assert_array_equal(trial.score_samples(X), full.score_samples(X))

    trials = []
    fit = classifier_module._fit_class_model

    def spy(est, *args, trial=False, **kwargs):
        trials.append(trial)
        return fit(est, *args, trial=trial, **kwargs)

    monkeypatch.setattr(classifier_module, "_fit_class_model", spy)
    clf = LatentTreeClassifier(n_hidden_states="auto", random_state=0, n_jobs=1).fit(X, y)
    assert any(trials) and not all(trials)  # the out-of-fold fits are trials
    assert all(hasattr(m, "raw_estimate_") for m in clf.estimators_)
    assert hasattr(clf.joint_estimator_, "raw_estimate_")


@pytest.mark.slow  # starts worker processes
def test_classifier_auto_gives_the_same_models_in_worker_processes_or_here(monkeypatch):
    from ltm_sklearn._estimators import classifier as classifier_module

    # the trial fits after the first in workers whenever n_jobs allows (however short)
    monkeypatch.setattr(classifier_module, "worth_workers", lambda n_jobs, seconds: n_jobs > 1)
    X, y, _, _ = two_class_data(n_per_class=100)
    fits = [
        LatentTreeClassifier(
            SpectralLatentTree(structure="hclt", max_iter=10, random_state=0),
            n_hidden_states="auto",
            n_jobs=n_jobs,
        ).fit(X, y)
        for n_jobs in (1, 2)
    ]
    assert fits[0].n_hidden_states_scores_ == fits[1].n_hidden_states_scores_
    np.testing.assert_array_equal(fits[0].predict_proba(X), fits[1].predict_proba(X))


def test_folds_without_a_class_are_scored_as_scikit_learn_classifiers_score_them():
    # a class of 2 rows: one test fold of three holds none of it, and cross_val_score
    # gives what it gives a LogisticRegression (finite scores, or NaN with a warning
    # where the scorer needs every class in the test fold)
    X, y, *_ = two_class_data(60)
    y = y.astype(object)
    y[[3, 70]] = "rare"
    ours = LatentTreeClassifier(SpectralLatentTree(structure="chow_liu"), random_state=0)
    lr = make_pipeline(OneHotEncoder(handle_unknown="ignore"), LogisticRegression())
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    for scoring in ("accuracy", "neg_log_loss", "roc_auc_ovr"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            a = cross_val_score(ours, X, y, scoring=scoring, cv=cv)
            b = cross_val_score(lr, X, y, scoring=scoring, cv=cv)
        np.testing.assert_array_equal(np.isfinite(a), np.isfinite(b))
        assert np.any(np.isfinite(a))
        # the fold without the class: scikit-learn's scorers need every class there
        assert scoring == "accuracy" or not np.all(np.isfinite(b))


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 4])
def test_default_classifier_reaches_the_bayes_log_loss_of_a_latent_tree_truth(seed):
    # the class is a leaf of a latent tree; the default (the pool) at 10,000 rows
    # (measured: 0.0005-0.0011 nats above the Bayes-optimal log-loss on these truths)
    tree = random_binary_tree(8, random_state=1) if seed == 1 else balanced_binary_tree(8)
    truth = LatentTreeModel.random(tree, 2, 3, noise=0.3, random_state=seed)
    data, test = truth.sample(10_000, random_state=0), truth.sample(5_000, random_state=1)
    clf = LatentTreeClassifier(random_state=0).fit(data[:, :7], data[:, 7])
    lls = np.column_stack(
        [
            truth.log_likelihood(np.column_stack([test[:, :7], np.full(len(test), v)]))
            for v in range(3)
        ]
    )
    bayes = np.exp(lls - logsumexp(lls, axis=1, keepdims=True))
    rows = np.arange(len(test))
    loss_bayes = -np.log(bayes[rows, test[:, 7]]).mean()
    loss = -np.log(clf.predict_proba(test[:, :7])[rows, test[:, 7]]).mean()
    assert 0 <= loss - loss_bayes + 0.005 and loss - loss_bayes < 0.02, (loss, loss_bayes)


def test_default_models_are_hidden_chow_liu_trees_and_auto_grows_from_naive_bayes():
    """Without an estimator every model is a hidden Chow-Liu tree; its k' = 1 model is the
    independence model, so n_hidden_states="auto" scores that candidate once, as k' = 1,
    and grows from it."""
    X, y, _, _ = two_class_data(n_per_class=400)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = LatentTreeClassifier(random_state=0).fit(X, y)
        auto = LatentTreeClassifier(n_hidden_states="auto", random_state=0).fit(X, y)
    assert [m.structure_ for m in clf.estimators_] == ["hclt", "hclt"]
    assert clf.joint_estimator_.structure_ == "hclt"
    scores = auto.n_hidden_states_scores_
    assert scores[1] == auto.independence_score_ and min(scores) == 1 and 2 in scores
    # the latent truth: a hidden Chow-Liu tree with hidden states beats naive Bayes
    assert auto.class_params_ == {"n_hidden_states": auto.n_hidden_states_}
    assert auto.n_hidden_states_ >= 2 and min(scores, key=scores.get) == auto.n_hidden_states_


def test_calibration_refits_the_joint_model_with_its_choices_on_every_row(monkeypatch):
    """The pool's calibration fold refits the joint model with the ``k'``, structure and
    members that its fit on every row chose (``"auto"`` is not chosen again on the fold's
    rows); the choices are read from the fitted ``<name>_`` attributes."""
    X, y, *_ = two_class_data(300)
    fits = []
    original = LatentTreeClassifier._fit_joint

    def recording(self, *args, **kwargs):
        est = original(self, *args, **kwargs)
        fits.append(est)
        return est

    monkeypatch.setattr(LatentTreeClassifier, "_fit_joint", recording)
    base = SpectralLatentTree(n_hidden_states="auto", random_state=0)
    clf = LatentTreeClassifier(base, model="pooled", random_state=0).fit(X, y)
    assert len(fits) == 2 and fits[0] is clf.joint_estimator_
    every_row, fold = fits[0], fits[1]
    assert every_row.get_params()["n_hidden_states"] == "auto"
    params = fold.get_params()
    assert params["n_hidden_states"] == every_row.n_hidden_states_
    assert params["structure"] == every_row.structure_
    assert params["n_members"] == every_row.n_members_
    assert fold.n_hidden_states_ == every_row.n_hidden_states_


def test_on_many_rows_the_pool_is_calibrated_on_the_joint_models_own_held_out_rows(
    monkeypatch,
):
    """Above 2,000 rows the joint model is fitted once: the calibration reads the
    held-out rows of its selection and the posteriors of the model that the selection
    fitted on the rest, and the estimator then forgets that model. On fewer rows the
    joint model is fitted again on a calibration fold."""
    X, y, *_ = two_class_data(1100)
    fits, taken, held_out = [], [], []

    def recording(method, record):
        def wrapper(*args, **kwargs):
            record.append(method(*args, **kwargs))
            return record[-1]

        return wrapper

    for cls, name, record in [
        (LatentTreeClassifier, "_fit_joint", fits),
        (LatentTreeClassifier, "_joint_held_out", held_out),
        (BaseLatentTree, "_take_held_out_model", taken),
    ]:
        monkeypatch.setattr(cls, name, recording(getattr(cls, name), record))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = LatentTreeClassifier(n_hidden_states="auto", random_state=0).fit(X, y)
    assert clf.model_ == "pooled" and len(fits) == 1 and fits[0] is clf.joint_estimator_
    assert not hasattr(clf.joint_estimator_, "_held_out_fit")  # forgotten once read
    assert "_keeps_held_out_fit" not in vars(clf.joint_estimator_)  # a later fit keeps none
    ((split, model),) = taken
    ((fold, log_proba),) = held_out
    train, val, w_train, w_val = fold
    # the fold is the selection's split (both classes have hundreds of rows)
    np.testing.assert_array_equal(val, split.rows)
    np.testing.assert_array_equal(w_val, split.weights)
    np.testing.assert_array_equal(train, split.train)
    np.testing.assert_array_equal(w_train, split.train_weights)
    assert 0.1 < w_val.sum() / len(y) < 0.3
    # the posteriors of the model of the training rows, not those of the final model
    np.testing.assert_allclose(log_proba, clf._joint_log_proba(X[val], model))
    assert np.max(np.abs(log_proba - clf._joint_log_proba(X[val]))) > 1e-3
    assert set(clf.calibration_scores_) == {"default", "chosen"}
    np.testing.assert_allclose(clf.predict_proba(X[:20]).sum(axis=1), 1.0)
    fits.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        LatentTreeClassifier(n_hidden_states="auto", random_state=0).fit(X[:1800], y[:1800])
    assert len(fits) == 2  # the joint model refitted on a calibration fold


def test_default_joint_model_has_a_hidden_state_per_class():
    """The class is a column below a hidden node of the joint model, whose posterior has
    rank at most that node's states: the default joint model gets a state per class
    (as many as its rows can estimate), the per-class models keep k' = 2."""
    rng = np.random.default_rng(0)
    X = rng.integers(0, 3, size=(600, 6))
    y = (X[:, 0] + X[:, 1] + rng.integers(0, 2, size=600)) % 5  # five classes
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = LatentTreeClassifier(random_state=0).fit(X, y)
        given = LatentTreeClassifier(SpectralLatentTree(2, structure="hclt"), random_state=0)
        given.fit(X, y)
    assert clf.joint_estimator_.n_hidden_states_ == 5
    assert {m.n_hidden_states_ for m in clf.estimators_} == {2}
    assert given.joint_estimator_.n_hidden_states_ == 2  # a given estimator keeps its k'
    np.testing.assert_allclose(clf.predict_proba(X[:50]).sum(axis=1), 1.0)
    # ten classes: on 6 rows the 6 states they estimate; on one row the estimator's own
    # k' (whose fit then names the problem)
    clf.classes_ = np.arange(10)
    assert clf._joint_states(SpectralLatentTree(2), 6) == 6
    assert clf._joint_states(SpectralLatentTree(2), 1) == 2
    clf.classes_ = np.arange(500)  # hundreds of classes: at most _JOINT_MAX_STATES
    assert clf._joint_states(SpectralLatentTree(2), 10_000) == 32


def test_calibration_fold_caps_the_joint_states_at_what_its_rows_estimate():
    """A k' chosen on every row may be more than the calibration fold's rows estimate
    (k' = 32 needs 103 rows): the fold's joint model takes the most its rows can, not an
    error (a 5-fold cross-validation of n_hidden_states="auto" on lymphography failed
    so)."""
    X, y, *_ = two_class_data(50)
    clf = LatentTreeClassifier(model="joint", random_state=0).fit(X, y)
    like = clf.joint_estimator_
    like.set_params(n_hidden_states="auto")
    like.n_hidden_states_ = 32  # as if chosen on more rows than the fold has
    y_idx = np.searchsorted(clf.classes_, y)
    fold = clf._fit_joint(SpectralLatentTree(structure="hclt"), X, y_idx, np.ones(100), like)
    assert fold.n_hidden_states_ == 24  # the largest k' of the ladder within 100 rows


def test_an_estimator_whose_fit_takes_no_sample_weight_is_named():
    X, y, *_ = two_class_data(60)
    with pytest.raises(TypeError, match="which GaussianMixture.fit does not take"):
        LatentTreeClassifier(GaussianMixture(1), random_state=0).fit(X.astype(float), y)


def test_a_class_of_fewer_rows_than_hidden_states_keeps_the_users_structure():
    # a rare class leaves a cross-validation fold with a row or two of it
    X = LatentTreeModel.random(balanced_binary_tree(8), 2, 3, random_state=0).sample(400)
    y = np.zeros(400, int)
    y[0], y[1:3] = 1, 2
    for k, states in ((2, [2, 1, 2]), ("auto", ["auto", 1, 1])):
        estimator = SpectralLatentTree(k, structure="hclt", random_state=0)
        with pytest.warns(UserWarning, match=r"classes 1 \(1 rows\)"):
            clf = LatentTreeClassifier(estimator, random_state=0).fit(X, y)
        assert [e.n_hidden_states for e in clf.estimators_] == states
        assert all(e.structure_ == "hclt" for e in clf.estimators_)
        np.testing.assert_allclose(clf.predict_proba(X[:5]).sum(axis=1), 1.0)


def test_shared_tree_and_n_hidden_states_with_estimators_that_lack_the_parameter():
    X = GaussianLatentTreeModel.random(balanced_binary_tree(8), random_state=0).sample(400)
    y = (X[:, 0] > np.median(X[:, 0])).astype(int)
    gaussian = GaussianLatentTree(n_components=1, random_state=0)
    clf = LatentTreeClassifier(gaussian, shared_tree=True).fit(X, y)
    assert clf.estimators_[0].tree_.edges == clf.estimators_[1].tree_.edges
    np.testing.assert_allclose(clf.predict_proba(X[:5]).sum(axis=1), 1.0)
    with pytest.raises(ValueError, match="GaussianLatentTree has no n_hidden_states"):
        LatentTreeClassifier(gaussian, n_hidden_states=2).fit(X, y)
    with pytest.raises(ValueError, match="holds the class as a categorical column"):
        LatentTreeClassifier(gaussian, model="joint").fit(X, y)
    codes = LatentTreeModel.random(balanced_binary_tree(8), 2, 3, random_state=0).sample(300)
    labels = (codes[:, 0] > 0).astype(int)
    quartet = QuartetTreeLearner(random_state=0)
    with pytest.raises(ValueError, match="which QuartetTreeLearner does not have"):
        LatentTreeClassifier(quartet, shared_tree=True).fit(codes, labels)
    # a quartet model learns its own tree: the joint model and the pool apply
    assert LatentTreeClassifier(quartet, random_state=0).fit(codes, labels).model_ == "pooled"


def test_an_array_scored_by_a_classifier_fitted_on_a_frame_warns_once():
    X = LatentTreeModel.random(balanced_binary_tree(8), 2, 3, random_state=0).sample(300)
    y = (X[:, 0] > 0).astype(int)
    frame = pd.DataFrame(X, columns=[f"c{i}" for i in range(8)])
    estimator = SpectralLatentTree(structure="hclt", random_state=0)
    clf = LatentTreeClassifier(estimator, random_state=0).fit(frame, y)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from_array = clf.predict_proba(X)
    assert [str(w.message) for w in caught if "feature names" in str(w.message)] == [
        "X does not have valid feature names, but LatentTreeClassifier was fitted with "
        "feature names"
    ]
    np.testing.assert_array_equal(from_array, clf.predict_proba(frame))


def test_a_warning_about_the_columns_is_issued_once_per_fit_not_once_a_model():
    rng = np.random.RandomState(0)
    X = pd.DataFrame(
        {"a": rng.randn(300), "b": rng.randn(300), "coded": rng.randint(1, 4, 300) * 1.0}
    )
    y = (X["a"] + rng.randn(300) > 0).astype(int)
    estimator = KernelLatentTree(2, random_state=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        LatentTreeClassifier(estimator, shared_tree=True, random_state=0).fit(X, y)
    about_coded = [w for w in caught if "column 'coded'" in str(w.message)]
    assert len(about_coded) == 1 and "3 distinct numbers" in str(about_coded[0].message)


def test_the_same_values_in_any_container_give_the_same_classifier():
    # the calibration fold is keyed on the values as numbers: ints in a NumPy array,
    # floats, objects and a DataFrame are the same rows to it, as to the class models
    X, y = load_table("breast", names=True)
    codes = X.apply(lambda c: c.cat.codes).astype("int64")
    probas = [
        LatentTreeClassifier(SpectralLatentTree(2, structure="hclt"), random_state=0)
        .fit(Z, y)
        .predict_proba(Z)
        for Z in (codes, codes.to_numpy(), codes.to_numpy(float), codes.to_numpy(object))
    ]
    for p in probas[1:]:
        np.testing.assert_allclose(p, probas[0], rtol=1e-12)


def test_a_class_of_rows_of_weight_zero_only_is_left_out_with_a_warning():
    X, y, tree, _ = two_class_data(200)
    y = y.astype(object)
    y[:5] = "rare"
    w = np.ones(len(y))
    w[:5] = 0.0
    with pytest.warns(UserWarning, match=r"\['rare'\] have rows of weight zero only"):
        clf = LatentTreeClassifier(SpectralLatentTree(2, tree=tree), random_state=0)
        clf.fit(X, y, sample_weight=w)
    assert "rare" not in clf.classes_ and clf.predict_proba(X[:3]).shape == (3, 2)


def test_an_infinite_label_is_named_without_a_warning_before():
    X = np.random.default_rng(0).integers(0, 2, (40, 3))
    y = np.r_[np.zeros(20), np.ones(19), np.inf]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="y contains infinity"):
            LatentTreeClassifier().fit(X, y)


@pytest.mark.parametrize("model", ["per_class", "pooled"])
def test_an_unseen_category_says_nothing_of_the_class(model):
    # its likelihood under a class of few rows is larger: read as evidence, one unseen
    # value moved a car row from 0.03 to 0.93; it is read as a missing entry
    X, y = load_table("car", names=True)
    clf = LatentTreeClassifier(model=model, random_state=0).fit(X, y)
    row = X.iloc[[335]].astype(object)
    unseen, missing = row.copy(), row.copy()
    unseen.iloc[0, 0], missing.iloc[0, 0] = "vhigh ", np.nan
    np.testing.assert_allclose(clf.predict_proba(unseen), clf.predict_proba(missing))
    if model == "per_class":  # nothing known of a row: the class prior
        row.iloc[0, :] = "??"
        np.testing.assert_allclose(clf.predict_proba(row)[0], clf.class_prior_, atol=1e-9)


def test_many_classes_raise_no_warning_about_the_class_column_and_empty_rows_name_it():
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.integers(0, 3, (330, 3)), columns=list("abc"))
    y = np.repeat(np.arange(55), 6)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*distinct whole numbers")
        clf = LatentTreeClassifier(SpectralLatentTree(1), random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="required by LatentTreeClassifier"):
        clf.predict_proba(X.iloc[:0])


@pytest.mark.parametrize("kw", [{"n_hidden_states": "auto"}, {"model": "select"}])
def test_the_folded_choices_do_not_depend_on_row_order_or_on_weights_against_copies(kw):
    # the folds are keyed on the rows' values and classes, as the calibration split
    X, y = load_table("breast", names=True)
    X, y = X.iloc[:200].reset_index(drop=True), np.asarray(y)[:200]
    ref = LatentTreeClassifier(random_state=0, **kw).fit(X, y).predict_proba(X)
    order = np.random.default_rng(0).permutation(len(y))
    shuffled = LatentTreeClassifier(random_state=0, **kw).fit(X.iloc[order], y[order])
    np.testing.assert_allclose(shuffled.predict_proba(X), ref, atol=1e-9)
    w = np.r_[np.full(100, 2.0), np.ones(100)]
    twice = np.r_[np.arange(100), np.arange(200)]
    weighted = LatentTreeClassifier(random_state=0, **kw).fit(X, y, sample_weight=w)
    copies = LatentTreeClassifier(random_state=0, **kw).fit(X.iloc[twice], y[twice])
    np.testing.assert_allclose(weighted.predict_proba(X), copies.predict_proba(X), atol=1e-9)
