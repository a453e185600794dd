"""A learner's function from ``tests/chNN/learners.py`` as the code cell a learner would write.

The cell holds the module's imports, every helper the function uses (found by name, in the
module's order, so ``sdpa_no_scale`` brings its ``_my_softmax``), and the function itself renamed
to the exercise's name under ``@exercise``: the grader sees a learner's notebook, not a test
module.
"""

from __future__ import annotations

import ast
import inspect
from functools import cache
from types import ModuleType
from typing import Callable


def exercise_cell(fn: Callable, name: str) -> str:
    """The source of a notebook cell in which ``fn`` is the exercise ``name``."""
    module = inspect.getmodule(fn)
    defs, imports = _top_level(module)
    if fn.__name__ not in defs:
        raise ValueError(f"{fn.__name__} is not defined at the top level of {module.__name__}")
    needed = _needed(fn.__name__, defs)
    helpers = [defs[n][1] for n in sorted(needed - {fn.__name__}, key=lambda n: defs[n][0])]
    own = defs[fn.__name__][1]
    keyword = "class" if own.lstrip().startswith("class") else "def"
    head = f"{keyword} {fn.__name__}"
    if not own.startswith(head):
        raise ValueError(f"{fn.__name__}: expected its source to start with {head!r}")
    own = f"@exercise\n{keyword} {name}" + own[len(head):]
    return "\n".join([*imports, "from mhsa_ref import exercise", "", *[h + "\n" for h in helpers], own]) + "\n"


@cache
def _top_level(module: ModuleType) -> tuple[dict[str, tuple[int, str]], tuple[str, ...]]:
    """The module's top-level definitions (name -> (position, source)) and import lines."""
    text = inspect.getsource(module)
    tree = ast.parse(text)
    defs: dict[str, tuple[int, str]] = {}
    imports = []
    for i, node in enumerate(tree.body):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if not (isinstance(node, ast.ImportFrom) and node.module == "__future__"):
                imports.append(ast.get_source_segment(text, node))
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            defs[node.name] = (i, ast.get_source_segment(text, node))
        elif isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets):
            for target in node.targets:
                defs[target.id] = (i, ast.get_source_segment(text, node))
    return defs, tuple(imports)


def _needed(name: str, defs: dict[str, tuple[int, str]]) -> set[str]:
    """``name`` and every top-level definition it reaches by name."""
    seen, todo = set(), [name]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        used = {n.id for n in ast.walk(ast.parse(defs[current][1])) if isinstance(n, ast.Name)}
        todo.extend(sorted(u for u in used if u in defs and u not in seen))
    return seen
