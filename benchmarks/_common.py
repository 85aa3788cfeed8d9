"""Helpers shared by the benchmark scripts: timing, markdown tables, result files."""

from __future__ import annotations

import platform
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"


def timed(func, *args, **kwargs):
    t0 = time.perf_counter()
    out = func(*args, **kwargs)
    return out, time.perf_counter() - t0


def relative_joint_error(log_p_hat, log_p):
    """Per-row ``|P_hat(x) - P(x)| / P(x)`` (papers/000 and 003)."""
    return np.abs(np.expm1(np.asarray(log_p_hat) - np.asarray(log_p)))


def markdown_table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def machine():
    import os

    cpu = platform.processor() or platform.machine()
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}"


def save(name, text):
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.md").write_text(text + "\n")
    print(text)
