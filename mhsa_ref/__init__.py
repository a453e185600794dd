"""mhsa_ref: reference code, exercise checks and tooling for "Multi-Head Self-Attention, Step by Step".

The package, file by file:
    attention.py        reference maths (NumPy): softmax, scaled dot-product attention
    validate.py         argument checks with errors that name the argument and its shape
    exercises/          the exercise registry: one description per exercise (spec.py, chNN.py)
    judge.py            outcomes of a learner's function -> one verdict, misconceptions named
    checks.py           what notebooks use: @exercise and check(fn)
    plotting.py         the book's figures (attention heatmaps)
    device.py           picks cuda > mps > cpu
    assign.py           solutions/ -> book/ generator (python -m mhsa_ref.assign)
"""

from .checks import check, exercise

__all__ = ["check", "exercise"]
__version__ = "0.1.0"
