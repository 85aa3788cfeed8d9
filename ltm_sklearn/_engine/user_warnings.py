"""The package's warnings, issued through :func:`warn` so that a fit can collect or
drop those of the fits it runs inside it, in its own thread only.

``warnings.catch_warnings`` swaps the filters of the whole process: two fits in two
threads (joblib's threading backend, a web server's threads) each restored what the
other had set, and the process was left recording warnings that nobody issued (a
classifier's fit in two threads at once, 4 of 4 trials). :func:`collected_warnings`
holds its rules in the calling thread instead; a warning that no rule takes goes to
``warnings.warn``, where the user's filters apply, pointing at the user's line.
Warnings of other libraries are not routed: they reach the user's filters directly.
"""

from __future__ import annotations

import contextlib
import re
import threading
import warnings

from .user_frames import user_stacklevel

__all__ = ["collected_warnings", "warn"]

_RULES = threading.local()


def _rules():
    rules = getattr(_RULES, "stack", None)
    if rules is None:
        rules = _RULES.stack = []
    return rules


def warn(message, category=UserWarning):
    """Issue ``message`` (of ``category``) pointing at the user's line, unless a
    :func:`collected_warnings` block of this thread takes it (the innermost block whose
    pattern it matches)."""
    for pattern, sink in reversed(_rules()):
        if pattern is None or re.match(pattern, message):
            if sink is not None:
                sink.append((message, category))
            return
    warnings.warn(message, category, stacklevel=user_stacklevel())


@contextlib.contextmanager
def collected_warnings(action="record", message=None):
    """The package's warnings issued by this thread in the block: recorded
    (``action="record"``: yields the list of ``(message, category)`` pairs) or dropped
    (``"ignore"``); with ``message``, a regular expression, only the warnings whose
    message matches it from its start. Blocks nest; other threads are not affected."""
    if action not in ("record", "ignore"):
        raise ValueError(f"action must be 'record' or 'ignore'; got {action!r}.")
    caught = [] if action == "record" else None
    rules = _rules()
    rules.append((message, caught))
    try:
        yield caught
    finally:
        rules.pop()
