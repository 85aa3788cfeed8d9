"""The bundled data: thirteen public tables (provenance in ``ltm_sklearn/data/README.md``)
and five sets of the binary density-estimation benchmark with their fixed splits and
published figures."""

from __future__ import annotations

import gzip
import json
from importlib import resources

import numpy as np
import pandas as pd

# ---------------------------------------------------------------------- bundled tables
#: names of the bundled public tables (see ``ltm_sklearn/data/README.md``)
TABLES = (
    "australian",
    "breast",
    "car",
    "contraceptive",
    "crx",
    "german",
    "lymphography",
    "magic",
    "marketing",
    "monk2",
    "pima",
    "segment",
    "wdbc",
)


#: attribute names of the UCI documentation of the tables, in column order
UCI_NAMES = {
    "breast": [
        "age", "menopause", "tumor_size", "inv_nodes", "node_caps", "deg_malig", "breast",
        "breast_quad", "irradiat",
    ],
    "car": ["buying", "maint", "doors", "persons", "lug_boot", "safety"],
    "contraceptive": [
        "wife_age", "wife_education", "husband_education", "n_children", "wife_religion",
        "wife_working", "husband_occupation", "living_standard", "media_exposure",
    ],
    "german": [
        "checking_account", "duration", "credit_history", "purpose", "amount", "savings",
        "employment_since", "installment_rate", "personal_status", "other_debtors",
        "residence_since", "property", "age", "other_installments", "housing",
        "existing_credits", "job", "people_liable", "telephone", "foreign_worker",
    ],
    "lymphography": [
        "lymphatics", "block_of_affere", "block_of_lymph_c", "block_of_lymph_s", "by_pass",
        "extravasates", "regeneration", "early_uptake", "lym_nodes_dimin", "lym_nodes_enlar",
        "changes_in_lym", "defect_in_node", "changes_in_node", "changes_in_stru",
        "special_forms", "dislocation", "exclusion_of_no", "no_of_nodes",
    ],
    "marketing": [
        "sex", "marital_status", "age", "education", "occupation", "years_in_bay_area",
        "dual_incomes", "persons_in_household", "persons_under_18", "householder_status",
        "type_of_home", "ethnic_classification", "language",
    ],
    "monk2": ["a1", "a2", "a3", "a4", "a5", "a6"],
    "pima": [
        "pregnancies", "glucose", "blood_pressure", "skin_thickness", "insulin", "bmi",
        "pedigree", "age",
    ],
}  # fmt: skip


def load_table(name, columns="all", names=False):
    """Load one of the bundled public tables (KEEL copies of UCI tables).

    Parameters
    ----------
    name : str
        One of :data:`TABLES`.
    columns : {"all", "categorical", "numeric"}, default="all"
        Which feature columns to return.
    names : bool, default=False
        Name the columns after the attributes of the UCI documentation (where
        :data:`UCI_NAMES` has them; the files' own names are ``x0..x{d-1}``).

    Returns
    -------
    X : pandas.DataFrame
        Categorical columns as pandas ``Categorical`` (string categories), numeric
        columns as float.
    y : ndarray of str
        The class of every row.

    Examples
    --------
    >>> X, y = load_table("breast")
    >>> X.shape, sorted(set(y))
    ((277, 9), ['no-recurrence-events', 'recurrence-events'])
    """
    if name not in TABLES:
        raise ValueError(f"Unknown table {name!r}; the bundled tables are {TABLES}.")
    if columns not in ("all", "categorical", "numeric"):
        raise ValueError(f"columns must be 'all', 'categorical' or 'numeric', got {columns!r}.")
    folder = resources.files("ltm_sklearn") / "data"
    schema = json.loads((folder / "schema.json").read_text())[name]
    with (folder / f"{name}.csv.gz").open("rb") as fh:
        df = pd.read_csv(fh, compression="gzip", dtype=str, keep_default_na=False)
    y = df.pop("y").to_numpy()
    for c in schema["numeric"]:
        df[c] = df[c].astype(float)
    for c in schema["categorical"]:
        df[c] = df[c].astype("category")
    keep = {
        "all": list(df.columns),
        "categorical": schema["categorical"],
        "numeric": schema["numeric"],
    }[columns]
    df = df[[c for c in df.columns if c in keep]]
    if names and name in UCI_NAMES:
        df = df.rename(columns={f"x{j}": n for j, n in enumerate(UCI_NAMES[name])})
    return df, y


# ---------------------------------------------------------------------- density benchmark
#: the bundled sets of the binary density-estimation benchmark (``data/debd/README.md``)
DEBD_SETS = ("nltcs", "plants", "baudio", "jester", "bnetflix")
#: published test log-likelihoods per row (nats): hidden Chow-Liu tree circuits (HCLT),
#: mixtures of trees (MT) and mixtures of all trees (MoAT) - Selvam, Zhang & Van den
#: Broeck, "Mixtures of All Trees", AISTATS 2023, Table 1
DEBD_PUBLISHED = {
    "nltcs": {"HCLT": -5.99, "MT": -6.01, "MoAT": -6.07},
    "plants": {"HCLT": -14.26, "MT": -12.95, "MoAT": -13.50},
    "baudio": {"HCLT": -39.77, "MT": -40.08, "MoAT": -39.03},
    "jester": {"HCLT": -52.46, "MT": -53.08, "MoAT": -51.65},
    "bnetflix": {"HCLT": -56.27, "MT": -56.74, "MoAT": -55.52},
}


def load_debd(name):
    """Load one set of the binary density-estimation benchmark with its fixed splits.

    Parameters
    ----------
    name : str
        One of :data:`DEBD_SETS`.

    Returns
    -------
    train, valid, test : ndarray of shape (n_rows, n_columns), dtype int8
        0/1 rows. The literature learns on ``train``, chooses hyper-parameters on
        ``valid`` and reports the mean test log-likelihood per row
        (:data:`DEBD_PUBLISHED`).

    Examples
    --------
    >>> train, valid, test = load_debd("nltcs")
    >>> train.shape, valid.shape, test.shape
    ((16181, 16), (2157, 16), (3236, 16))
    """
    if name not in DEBD_SETS:
        raise ValueError(f"Unknown set {name!r}; the bundled sets are {DEBD_SETS}.")
    folder = resources.files("ltm_sklearn") / "data" / "debd"
    out = []
    for split in ("train", "valid", "test"):
        with (folder / f"{name}.{split}.csv.gz").open("rb") as fh:
            out.append(np.loadtxt(gzip.open(fh), delimiter=",", dtype=np.int8, ndmin=2))
    return tuple(out)
