"""Execute a chapter notebook once in a Jupyter kernel, and ask its kernel what its exercises are.

Both notebook tests use this: ``test_notebooks`` for ``solutions/`` (every exercise passes) and
``test_colab`` for ``book/`` in a Colab-like runtime (every exercise is still to do). One
execution serves two checks: that the notebook runs top to bottom (cells tagged
``raises-exception`` may raise), and what ``evaluate`` says of each exercise function the
notebook defined, asked in the same kernel right after its last cell.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat

CELL_TIMEOUT = 120  # as _config.yml's execute.timeout
PROBE_MARK = "MHSA-NOTEBOOK-PROBE "
PROBE = """\
import json as _json
from mhsa_ref import exercises as _exercises
from mhsa_ref.checks import evaluate as _evaluate
print({mark!r} + _json.dumps({{
    ex.id: [_evaluate(globals()[ex.name], ex.id, seed=seed).status for seed in {seeds!r}]
    for ex in _exercises.for_chapter({chapter!r})}}))
"""


def execute(path: Path, chapter: str, seeds: tuple[int, ...], cwd: Path, km=None, env: dict | None = None):
    """Run ``path`` top to bottom in a kernel (this environment's, or ``km``'s), then the probe;
    return the executed notebook and {exercise id: [status per seed]}. Raises nbclient's
    CellExecutionError on a failing cell."""
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    probe = nbformat.v4.new_code_cell(PROBE.format(mark=PROBE_MARK, seeds=seeds, chapter=chapter))
    nb.cells.append(probe)
    client = NotebookClient(nb, km=km, timeout=CELL_TIMEOUT, allow_errors=False,
                            resources={"metadata": {"path": str(cwd)}})
    client.execute(**({"env": env} if env is not None else {}))
    printed = "".join(o.get("text", "") for o in nb.cells[-1].outputs if o.get("output_type") == "stream")
    line = next(line for line in printed.splitlines() if line.startswith(PROBE_MARK))
    nb.cells.pop()
    return nb, json.loads(line[len(PROBE_MARK):])
