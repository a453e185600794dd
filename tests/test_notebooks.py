"""The chapter notebooks against the registry: solutions pass every check, learners start at zero.

nbval (configured in pyproject.toml) separately runs every notebook in book/ and solutions/ top
to bottom; these tests look inside: they execute a notebook's code in this process and judge the
exercise functions it defines, which nbval cannot do (a failing `check` only prints).
"""

from __future__ import annotations

import re
import contextlib
import io

import nbformat
import pytest

from mhsa_ref import exercises
from mhsa_ref.assign import SETUP_TAG
from mhsa_ref.checks import evaluate

from .conftest import ROOT

CHAPTERS = sorted(p.name for p in (ROOT / "solutions").glob("[0-9][0-9]_*.ipynb"))


def _run(path):
    """Execute a notebook's code cells (setup cell excluded) and return its namespace."""
    nb = nbformat.read(path, as_version=4)
    namespace: dict = {"__name__": "__notebook__"}
    with contextlib.redirect_stdout(io.StringIO()):
        for cell in nb.cells:
            if cell.cell_type == "code" and SETUP_TAG not in cell.metadata.get("tags", []):
                exec(compile(cell.source, str(path), "exec"), namespace)
    import matplotlib.pyplot as plt

    plt.close("all")
    return nb, namespace


@pytest.mark.parametrize("name", CHAPTERS)
def test_solutions_pass_every_exercise_of_their_chapter(name):
    _, namespace = _run(ROOT / "solutions" / name)
    chapter = exercises.for_chapter(name[:2])
    assert chapter, f"chapter {name[:2]} has no exercises in the registry"
    for ex in chapter:
        for seed in (0, 7):
            verdict = evaluate(namespace[ex.name], ex.id, seed=seed)
            assert verdict.status == "passed", verdict.feedback


@pytest.mark.parametrize("name", CHAPTERS)
def test_learner_notebooks_start_not_implemented(name):
    nb, namespace = _run(ROOT / "book" / name)
    for ex in exercises.for_chapter(name[:2]):
        assert evaluate(namespace[ex.name], ex.id).status == "not_implemented"
    assert nb.metadata["mhsa_ref"]["chapter"] == name[:2]


@pytest.mark.parametrize("name", CHAPTERS)
def test_each_exercise_is_defined_once_and_followed_by_its_check(name):
    nb = nbformat.read(ROOT / "solutions" / name, as_version=4)
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    for ex in exercises.for_chapter(name[:2]):
        defining = [i for i, s in enumerate(code) if re.search(rf"@exercise\n(def|class) {ex.name}\(", s)]
        assert len(defining) == 1, f"{ex.id}: expected one `@exercise def/class {ex.name}` cell"
        assert f"check({ex.name})" in code[defining[0] + 1], f"{ex.id}: the next cell should check it"


@pytest.mark.parametrize("name", CHAPTERS)
def test_notebook_starts_with_title_and_setup_cell(name):
    nb = nbformat.read(ROOT / "book" / name, as_version=4)
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith(f"# {int(name[:2])}. ")
    first_code = next(c for c in nb.cells if c.cell_type == "code")
    assert SETUP_TAG in first_code.metadata.get("tags", [])
    assert "MHSA_REF_SOURCE" in first_code.source and "pick_device" in first_code.source


def test_toc_lists_every_chapter_notebook():
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [entry["file"] for entry in toc["chapters"]]
    for name in CHAPTERS:
        assert f"book/{name[:-6]}" in files
