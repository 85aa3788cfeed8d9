"""Sphinx configuration of the ltm_sklearn documentation.

Build with ``python -m sphinx -W -b html docs docs/_build/html`` (the ``docs`` extra);
the gallery runs every ``examples/plot_*.py``.
"""

import os
import sys

sys.path.insert(0, os.path.abspath(".."))

import ltm_sklearn  # noqa: E402

project = "ltm_sklearn"
author = "the ltm_sklearn developers"
copyright = "2026, the ltm_sklearn developers"
release = ltm_sklearn.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]

autosummary_generate = True
# the methods of the package's own base classes, not scikit-learn's metadata-routing API
autodoc_default_options = {
    "members": True,
    "inherited-members": "BaseEstimator,DensityMixin,ClassifierMixin,MetaEstimatorMixin",
    "exclude-members": (
        "set_fit_request,set_partial_fit_request,set_score_request,get_metadata_routing"
    ),
}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
templates_path = ["_templates"]
exclude_patterns = ["_build"]
html_theme = "alabaster"
html_static_path = []
html_theme_options = {"description": "Latent tree graphical models for scikit-learn"}

sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "ignore_pattern": r"demo_",
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
    "matplotlib_animations": False,
}
