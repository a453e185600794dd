"""results.json: DESIGN.md's schema (``results.BatchResults.to_json``), for tools. JSON escapes
whatever a submission put in its strings by construction."""

from __future__ import annotations

import json
from pathlib import Path

from ..results import BatchResults
from ..store import write_atomically


def write(batch: BatchResults, out: Path) -> None:
    write_atomically(out / "results.json", json.dumps(batch.to_json(), indent=1))
