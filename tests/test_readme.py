"""The README's quickstart runs as written."""

import pathlib
import re
import warnings

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"


def test_readme_quickstart_runs(capsys):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "the README has no python block"
    namespace = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the quickstart prints no warning
        for block in blocks:
            exec(compile(block, str(README), "exec"), namespace)
    out = capsys.readouterr().out
    assert "nan" not in out.lower()
    assert namespace["est"].score(namespace["X_test"]) < 0  # a log-likelihood of categories
