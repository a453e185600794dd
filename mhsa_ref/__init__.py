"""mhsa_ref: reference code, exercise checks and tooling for "Multi-Head Self-Attention, Step by Step".

The package, file by file:
    attention.py        reference maths (NumPy): softmax, scaled dot-product attention
    masks.py, heads.py  reference maths (NumPy) of chapters 03 and 04
    torch_mha.py        chapter 05: MultiHeadSelfAttention (PyTorch), from_torch_mha
    norm.py, block.py   chapter 06: layer_norm (NumPy), TransformerBlock (PyTorch)
    invoke.py           calling learner code; the harnesses that run module exercises
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
