"""Extract: from a submitted notebook, the definitions to grade and nothing else.

The notebook is read as JSON (never executed). Magics, shell lines and the setup cell go; of the
rest, top-level imports, function and class definitions and plain assignments are kept, and
everything else (loops such as training runs, plots, `check(...)` calls, prints) is dropped and
reported, so the grader runs what the exercises need and the learner can see what was left out.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat

from ..notebooks import is_setup_cell
from ..untrusted import standin_names

# Names a graded notebook may import from mhsa_ref: exactly what the sandbox's stand-in exports.
STANDIN_NAMES = standin_names()
DYNAMIC_CODE = {"eval", "exec", "compile", "__import__", "importlib.import_module", "importlib.__import__"}
MAX_NOTEBOOK_BYTES = 50 << 20


@dataclass
class Extracted:
    code: str  # the kept statements, as Python source
    # Imports of mhsa_ref's reference modules, dropped (they do not exist while grading) but kept
    # here so the forbidden-call check still sees what `ref` in `ref.softmax(x)` stood for.
    dropped_imports: str = ""
    dropped: list[str] = field(default_factory=list)  # "cell 4: a top-level `for` loop"
    syntax_errors: dict[int, str] = field(default_factory=dict)  # cell number -> message
    sources: dict[int, str] = field(default_factory=dict)  # cell number -> its (cleaned) source
    defined: set[str] = field(default_factory=set)  # names of the kept functions and classes


def read_notebook(path: Path) -> Any:
    if path.stat().st_size > MAX_NOTEBOOK_BYTES:
        raise ValueError(f"{path.name} is larger than {MAX_NOTEBOOK_BYTES >> 20} MB")
    return nbformat.read(str(path), as_version=4)


def extract(nb: Any) -> Extracted:
    result = Extracted("")
    kept: list[tuple[int, ast.stmt]] = []
    defined: set[str] = set()  # functions and classes kept so far
    lost: set[str] = set()  # names only a dropped statement would have bound
    for number, cell in enumerate(nb.cells, start=1):
        if cell.cell_type != "code" or is_setup_cell(cell):
            continue
        source = _without_ipython(cell.source)
        if source is None:
            result.dropped.append(f"cell {number}: a cell magic")
            continue
        result.sources[number] = source
        try:
            tree = ast.parse(source)
            ast.unparse(tree)  # deeply nested code fails here rather than later
        except SyntaxError as exc:
            result.syntax_errors[number] = f"line {exc.lineno}: {exc.msg}"
            result.dropped.append(f"cell {number}: does not parse (line {exc.lineno}: {exc.msg})")
            continue
        except (RecursionError, MemoryError, ValueError) as exc:  # e.g. 200,000 terms in one line
            result.syntax_errors[number] = f"too deeply nested or too large to read ({type(exc).__name__})"
            result.dropped.append(f"cell {number}: too deeply nested or too large to read")
            continue
        for node in tree.body:
            reason = _why_dropped(node, defined, lost)
            if reason:
                result.dropped.append(f"cell {number}, line {node.lineno}: {reason}")
                lost |= _bound(node)
                if isinstance(node, (ast.Import, ast.ImportFrom)) and _is_mhsa_ref(node):
                    result.dropped_imports += ast.unparse(node) + "\n"
            else:
                kept.append((number, node))
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    defined.add(node.name)
                lost -= _bound(node)
    # Keep only what the definitions need: a figure or a matplotlib import would cost time in
    # every sandbox and could fail there for reasons that have nothing to do with the exercises.
    needed = {n.id for _, node in kept if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
              for n in ast.walk(node) if isinstance(n, ast.Name)}
    assignments = [node for _, node in kept if isinstance(node, (ast.Assign, ast.AnnAssign))]
    while True:
        grew = {n.id for node in assignments if _bound(node) & needed
                for n in ast.walk(node) if isinstance(n, ast.Name)} - needed
        if not grew:
            break
        needed |= grew
    code = []
    for number, node in kept:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                and not _bound(node) & needed and not _is_mhsa_ref(node):
            result.dropped.append(f"cell {number}, line {node.lineno}: not needed by your definitions")
            continue
        code.append(ast.unparse(node))
    result.code = "\n\n".join(code) + "\n"
    result.defined = defined
    return result


def _bound(node: ast.stmt) -> set[str]:
    """Top-level names a statement binds."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
    return {n.id for t in targets if t is not None for n in ast.walk(t) if isinstance(n, ast.Name)}


def _is_mhsa_ref(node: ast.stmt) -> bool:
    if not isinstance(node, (ast.Import, ast.ImportFrom)):
        return False
    module = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
    return (module or "").split(".")[0] == "mhsa_ref"


def _without_ipython(source: str) -> str | None:
    """The cell as Python (None for a cell magic), line numbers kept.

    IPython's own input transformer reads the cell as Jupyter does: magics, shell lines and help
    (``x?``) become calls of ``get_ipython()``, which the extractor then drops; everything else,
    comments and strings included, is left exactly as written.
    """
    if source.lstrip().startswith("%%"):
        return None
    if not any(c in source for c in "%!?"):
        return source  # nothing IPython would change (and importing IPython costs time)
    try:  # valid Python (a `%` that is a modulo, a `?` in a comment): nothing for IPython either
        ast.parse(source)
        return source
    except (SyntaxError, ValueError):
        pass
    from IPython.core.inputtransformer2 import TransformerManager

    try:
        return TransformerManager().transform_cell(source)
    except Exception:  # IPython could not read it either: the parser will say why
        return source


def _uses_ipython(node: ast.stmt) -> bool:
    """Does the statement call IPython (a magic, a shell line or help, transformed)?"""
    return any(isinstance(n, ast.Name) and n.id == "get_ipython" for n in ast.walk(node))


def _why_dropped(node: ast.stmt, defined: set[str], lost: set[str]) -> str | None:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return None
    if _uses_ipython(node):
        return "IPython syntax (a magic such as `%timeit`, a shell line `!...` or help `x?`)"
    if isinstance(node, ast.Import):
        bad = [a.name for a in node.names if a.name.split(".")[0] == "mhsa_ref" and a.name not in STANDIN_NAMES]
        return f"`import {bad[0]}` (not available while grading)" if bad else None
    if isinstance(node, ast.ImportFrom):
        allowed = STANDIN_NAMES.get(node.module or "")
        if (node.module or "").split(".")[0] == "mhsa_ref" and (
            allowed is None or any(a.name not in allowed for a in node.names)
        ):
            available = ", ".join(f"{m}: {', '.join(sorted(n))}" for m, n in sorted(STANDIN_NAMES.items()))
            return f"`from {node.module} import ...` (while grading, mhsa_ref has only {available})"
        return None
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        if node.value is None:
            return None
        # `out = softmax(x)` would run graded code while loading: not needed, and it may hang.
        called = {n.func.id for n in ast.walk(node.value) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        if called & defined:
            return f"an assignment that runs your code (`{sorted(called & defined)[0]}(...)`)"
        needs = {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)} & lost
        if needs:
            return f"an assignment that needs `{sorted(needs)[0]}`, which was dropped"
        return None
    kind = {ast.For: "a top-level `for` loop", ast.While: "a top-level `while` loop",
            ast.With: "a `with` block", ast.If: "an `if` block", ast.Try: "a `try` block",
            ast.Expr: "an expression or call (e.g. a plot, `check(...)` or `print`)"}
    return next((text for cls, text in kind.items() if isinstance(node, cls)), f"a `{type(node).__name__}` statement")


def forbidden_uses(code: str, function: str, forbidden: tuple[str, ...]) -> list[str]:
    """Forbidden names that ``function`` (or a notebook function it calls) refers to.

    Names are resolved through the notebook's imports (``import torch.nn.functional as F`` makes
    ``F.softmax`` the name ``torch.nn.functional.softmax``). Any use of ``mhsa_ref`` besides the
    stand-in names, and dynamic code (``eval``, ``__import__``, ...), count as forbidden too.
    """
    tree = ast.parse(code)
    aliases: dict[str, str] = {}
    functions: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            _bind(node, aliases)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            functions[node.name] = node
    allowed = {f"{module}.{name}" for module, names in STANDIN_NAMES.items() for name in names}
    hits: list[str] = []
    seen: set[str] = set()
    todo = [function]
    while todo:
        name = todo.pop()
        if name in seen or name not in functions:
            continue
        seen.add(name)
        nodes = list(ast.walk(functions[name]))
        inner = {id(n.value) for n in nodes if isinstance(n, ast.Attribute)}  # only whole `a.b.c` chains
        for node in nodes:
            if id(node) in inner:
                continue
            if isinstance(node, (ast.Import, ast.ImportFrom)):  # imports inside the function
                for full in _bind(node, aliases):
                    _match(full, forbidden, allowed, hits)
            dotted = _dotted(node)
            if dotted is None:
                continue
            head, _, rest = dotted.partition(".")
            if head in functions and head not in seen:
                todo.append(head)
            resolved = aliases.get(head, head) + (f".{rest}" if rest else "")
            _match(resolved, forbidden, allowed, hits)
    return sorted(set(hits))


def _bind(node: ast.Import | ast.ImportFrom, aliases: dict[str, str]) -> list[str]:
    """Record the local names an import binds; return the full names it imports."""
    full_names = []
    for a in node.names:
        if isinstance(node, ast.ImportFrom):
            full = f"{node.module or ''}.{a.name}"
            aliases[a.asname or a.name] = full
        else:
            full = a.name
            aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        full_names.append(full)
    return full_names


def _match(name: str, forbidden: tuple[str, ...], allowed: set[str], hits: list[str]) -> None:
    if name in allowed or name == "mhsa_ref":
        return
    if name in DYNAMIC_CODE:
        hits.append(name)
    for f in forbidden:
        # Also the same function reached another way: torch._C._nn.scaled_dot_product_attention.
        same_elsewhere = "." in f and name.split(".")[0] == f.split(".")[0] and name.rsplit(".", 1)[-1] == f.rsplit(".", 1)[-1]
        if name == f or name.startswith(f + ".") or same_elsewhere:
            hits.append(name)


def _dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


def calls_function(code: str, caller: str, callee: str) -> bool:
    """Does ``caller`` (a top-level def in ``code``) refer to ``callee`` by name?"""
    for node in ast.parse(code).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == caller:
            return any(isinstance(n, ast.Name) and n.id == callee for n in ast.walk(node))
    return False
