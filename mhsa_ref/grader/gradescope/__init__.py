"""Everything Gradescope, in one place.

    results   gradescope/<student>.json: one result in Gradescope's results.json format (a writer
              of ``outputs.WRITERS``), and ``collect``, which hands one to Gradescope
    bundle    the autograder zip for one chapter: setup.sh, run_autograder, the package and a
              pyproject.toml derived from the real one; its limits are ``run.Limits``'s own

``python -m mhsa_ref.grader.gradescope collect OUT RESULTS_JSON CHAPTER`` is what
``run_autograder`` calls after grading.
"""

from __future__ import annotations

from .bundle import write_bundle
from .results import collect, gradescope_json, write

__all__ = ["collect", "gradescope_json", "write", "write_bundle"]
