"""Where a warning points: the first frame outside this package and scikit-learn."""

from __future__ import annotations

import sys
from pathlib import Path

import sklearn

__all__ = ["user_stacklevel"]

_OWN = (
    str(Path(__file__).resolve().parent.parent) + "/",
    str(Path(sklearn.__file__).resolve().parent) + "/",
)


def user_stacklevel():
    """The ``stacklevel`` for ``warnings.warn`` called by the caller of this function
    that names the first frame outside this package and scikit-learn's wrappers: the
    user's line, however deep the package's calls were (a fixed level names a line of
    the package when the same check runs from several estimators)."""
    frame, level = sys._getframe(1), 1
    while frame is not None and str(Path(frame.f_code.co_filename).resolve()).startswith(_OWN):
        frame, level = frame.f_back, level + 1
    return level
