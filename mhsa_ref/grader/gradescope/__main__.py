"""``python -m mhsa_ref.grader.gradescope collect OUT_DIR RESULTS_JSON CHAPTER`` (run_autograder's last step)."""

import sys
from pathlib import Path

from .results import collect

if sys.argv[1:2] != ["collect"] or len(sys.argv) != 5:
    sys.exit("usage: python -m mhsa_ref.grader.gradescope collect OUT_DIR RESULTS_JSON CHAPTER")
collect(Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4])
