"""The package's warnings channel: collected or dropped in the calling thread only."""

import threading
import warnings

import pytest

from ltm_sklearn._engine.user_warnings import collected_warnings, warn


def test_collected_warnings_record_drop_by_pattern_and_nest():
    with collected_warnings() as outer:
        warn("Column 'x' has 3 values", UserWarning)
        with collected_warnings("ignore", message="Column 'x'"):
            warn("Column 'x' again", UserWarning)  # dropped by the inner rule
            warn("Something else", RuntimeWarning)  # the outer rule records it
    assert outer == [("Column 'x' has 3 values", UserWarning), ("Something else", RuntimeWarning)]
    with pytest.warns(UserWarning, match="reaches the filters") as record:
        warn("reaches the filters")
    assert record[0].filename == __file__  # the user's line
    with pytest.raises(ValueError, match="action"):
        with collected_warnings("always"):
            pass


def test_a_rule_of_one_thread_does_not_touch_another():
    entered, done = threading.Event(), threading.Event()

    def hold():
        with collected_warnings("ignore"):
            entered.set()
            done.wait(10)

    t = threading.Thread(target=hold)
    t.start()
    entered.wait(10)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            warn("from the main thread")
        assert [str(w.message) for w in caught] == ["from the main thread"]
    finally:
        done.set()
        t.join()
