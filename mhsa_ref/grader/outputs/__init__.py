"""What a batch writes, one file per format, each a ``write(batch, out)`` of a ``BatchResults``.

    results_json  results.json: DESIGN.md's schema, for tools
    gradebook     gradebook.csv: one row per student and exercise, for spreadsheets and LMS imports
    feedback      feedback/<student>.md and .html, written for the learner
    gradescope    gradescope/<student>.json: Gradescope's results.json (``grader/gradescope/``, with
                  the rest of Gradescope)
    summary       summary.md and summary.png: the class at a glance, misconceptions counted
    copies        copies.md and copies.html: possible copies side by side, for a person to judge

A new format is a new file here and one line in ``WRITERS``. Everything a submission produced
(error messages, type names, file names) is untrusted text: every writer escapes it for its
format, never interprets it.
"""

from __future__ import annotations

from pathlib import Path

from ..results import BatchResults
from ..gradescope import results as gradescope
from . import copies, feedback, gradebook, results_json, summary

WRITERS = (results_json.write, gradebook.write, feedback.write, gradescope.write, summary.write, copies.write)


def write_all(batch: BatchResults, out: Path) -> dict:
    """Write every format into ``out``; return the results document."""
    for write in WRITERS:
        write(batch, Path(out))
    return batch.to_json()
