"""Helpers shared by the benchmark scripts: timing, markdown tables, result files."""

from __future__ import annotations

import platform
import time
from pathlib import Path

from ltm_sklearn.metrics import relative_joint_error  # noqa: F401

RESULTS = Path(__file__).resolve().parent / "results"


def timed(func, *args, **kwargs):
    t0 = time.perf_counter()
    out = func(*args, **kwargs)
    return out, time.perf_counter() - t0


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
