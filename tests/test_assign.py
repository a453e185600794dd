"""The generator solutions/ -> book/: book/ is exactly what it writes, and it writes it right."""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
import pytest

from mhsa_ref import assign
from mhsa_ref.assign import AssignError, stub_solutions

from .conftest import ROOT


def test_book_is_exactly_what_the_generator_writes():
    # The contract of DESIGN.md: book/ is generated, never edited by hand.
    assert assign.differences(ROOT) == []


def test_cli_check_mode_passes_on_the_repository(capsys):
    assert assign.main(["--root", str(ROOT), "--check"]) == 0


def test_every_chapter_has_a_learner_notebook_with_the_same_name():
    solutions = sorted(p.name for p in (ROOT / "solutions").glob("*.ipynb"))
    book = sorted(p.name for p in (ROOT / "book").glob("[0-9][0-9]_*.ipynb"))
    assert solutions and solutions == book


def test_stub_keeps_indentation_and_code_around_the_region():
    source = "def f(x):\n    y = 1\n    ### BEGIN SOLUTION\n    return x + y\n    ### END SOLUTION\n\ncheck(f)"
    assert stub_solutions(source) == f"def f(x):\n    y = 1\n    {assign.STUB}\n\ncheck(f)"


def test_stub_handles_several_regions_and_leaves_plain_cells_alone():
    source = "### BEGIN SOLUTION\na = 1\n### END SOLUTION\nb = 2\n  ### BEGIN SOLUTION\n  c = 3\n  ### END SOLUTION"
    assert stub_solutions(source) == f"{assign.STUB}\nb = 2\n  {assign.STUB}"
    assert stub_solutions("x = 1\nprint(x)") == "x = 1\nprint(x)"


@pytest.mark.parametrize(
    "source, problem",
    [
        ("### BEGIN SOLUTION\nx = 1", "never closed"),
        ("x = 1\n### END SOLUTION", "without"),
        ("### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION", "inside another"),
    ],
)
def test_malformed_regions_are_refused_with_the_line(source, problem):
    with pytest.raises(AssignError, match=problem):
        stub_solutions(source, "solutions/99_x.ipynb, cell 3")


def test_learner_notebooks_hold_no_solution_and_no_outputs():
    for path in sorted((ROOT / "book").glob("[0-9][0-9]_*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        solution = nbformat.read(ROOT / "solutions" / path.name, as_version=4)
        assert nb.metadata["mhsa_ref"]["chapter"] == path.name[:2]
        for cell in nb.cells:
            assert assign.BEGIN not in cell.source and assign.END not in cell.source
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None
        for cell in solution.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None
        stubs = sum(c.source.count(assign.STUB) for c in nb.cells if c.cell_type == "code")
        regions = sum(c.source.count(assign.BEGIN) for c in solution.cells)
        assert stubs == regions > 0


def _copy_book(tmp_path: Path) -> Path:
    for name in ("_config.yml", "_toc.yml", "README.md", "solutions", "book"):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, tmp_path / name)
    return tmp_path


def test_setup_cell_is_derived_from_config(tmp_path):
    root = _copy_book(tmp_path)
    config = (root / "_config.yml").read_text()
    old_url = assign.BookConfig.load(root).url
    (root / "_config.yml").write_text(config.replace(old_url, "https://github.com/someone/fork"))
    # The repository URL changed: both notebooks are now out of date ...
    assert any("book/01" in line for line in assign.differences(root))
    assign.write(root)
    # ... and regenerating puts the new URL in the setup cell of both, and the old one nowhere.
    for folder in ("book", "solutions"):
        text = (root / folder / "01_attention_numpy.ipynb").read_text()
        assert "git+https://github.com/someone/fork@main" in text
        assert old_url not in text
    assert assign.differences(root) == []


def test_check_mode_fails_when_a_learner_notebook_was_edited(tmp_path, capsys):
    root = _copy_book(tmp_path)
    path = root / "book" / "01_attention_numpy.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells[-1].source += "\nedited by hand"
    nbformat.write(nb, path)
    assert assign.main(["--root", str(root), "--check"]) == 1
    assert "book/01_attention_numpy.ipynb: differs" in capsys.readouterr().err
    assert assign.main(["--root", str(root)]) == 0
    assert assign.main(["--root", str(root), "--check"]) == 0


def test_check_mode_fails_on_committed_outputs_and_orphans(tmp_path, capsys):
    root = _copy_book(tmp_path)
    path = root / "solutions" / "01_attention_numpy.ipynb"
    nb = nbformat.read(path, as_version=4)
    code = next(c for c in nb.cells if c.cell_type == "code" and "setup" not in c.metadata.get("tags", []))
    code.outputs = [nbformat.v4.new_output("stream", name="stdout", text="hi\n")]
    nbformat.write(nb, path)
    shutil.copy(root / "book" / "01_attention_numpy.ipynb", root / "book" / "99_orphan.ipynb")
    assert assign.main(["--root", str(root), "--check"]) == 1
    err = capsys.readouterr().err
    assert "solutions/01_attention_numpy.ipynb: differs" in err
    assert "book/99_orphan.ipynb: has no solutions notebook" in err


def test_solution_only_cells_are_dropped_and_markdown_markers_refused(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("print('answer')", metadata={"tags": ["solution-only"]}),
        nbformat.v4.new_code_cell("x = 1"),
    ]
    learner = assign.learner_notebook(nb, "99", "99_x.ipynb")
    assert [c.source for c in learner.cells] == ["x = 1"]
    nb.cells.append(nbformat.v4.new_markdown_cell(f"{assign.BEGIN}\nanswer\n{assign.END}"))
    with pytest.raises(AssignError, match="code cells"):
        assign.learner_notebook(nb, "99", "99_x.ipynb")


def test_a_solutions_notebook_without_setup_cell_is_refused(tmp_path):
    root = _copy_book(tmp_path)
    path = root / "solutions" / "01_attention_numpy.ipynb"
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        cell.metadata.pop("tags", None)
    nbformat.write(nb, path)
    assert assign.main(["--root", str(root), "--check"]) == 2
