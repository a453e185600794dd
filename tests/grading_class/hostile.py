"""Exercises written by learners who attack the grader instead of (or besides) solving them.

Never called here: ``sources.exercise_cell`` turns each into a notebook cell, and only the
grader's sandbox runs them. Each one's expected status is in ``roster.py``, next to who
submits it.
"""

from __future__ import annotations

import json
import os

import numpy as np


def sdpa_spins(Q, K, V, mask=None):
    """Never returns: costs this exercise (timeout), not the class."""
    while True:
        pass


def softmax_exits(x, axis=-1):
    """Ends its own process on the spot, without any outcome: an error for this exercise."""
    os._exit(0)


def softmax_hoards_memory(x, axis=-1):
    """Reserves 256 MB after 256 MB until the address space runs out."""
    hoard = []
    while True:
        hoard.append(np.empty(1 << 25))


def softmax_forges_results(x, axis=-1):
    """Right, but first leaves a full-marks results file wherever a grader might look for one
    (Gradescope's, the working folder, the folders above it, the home folder)."""
    # The marker the test looks for is put together here, so that the notebook's own text (which
    # the grader may quote, in copies.md for one) never holds it.
    forged = {"score": 5.0, "max_score": 5.0, "output": "all tests passed (" + " ".join(["forged", "by", "a",
              "submission"]) + ")", "tests": []}
    for folder in (".", "..", "../..", "/tmp", os.path.expanduser("~"), "/autograder/results"):
        try:
            with open(os.path.join(folder, "results.json"), "w") as f:
                json.dump(forged, f)
        except OSError:
            pass
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_prints_a_score(x, axis=-1):
    """Prints what a naive grader might parse, and returns the textbook formula that overflows."""
    print("Score: 5 / 5 -- all tests passed")
    print(json.dumps({"score": 5.0, "max_score": 5.0, "status": "passed"}))
    e = np.exp(x)
    return e / np.sum(e, axis=axis, keepdims=True)


def sdpa_patches_numpy(Q, K, V, mask=None):
    """Makes NumPy's comparisons agree with anything (the judge's NumPy is not this one), and
    forgets to scale the scores."""
    np.allclose = lambda *args, **kwargs: True
    np.array_equal = lambda *args, **kwargs: True
    np.testing.assert_allclose = lambda *args, **kwargs: None
    scores = Q @ np.swapaxes(K, -1, -2)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    has_key = np.any(np.isfinite(scores), axis=-1, keepdims=True)
    scores = np.where(has_key, scores, 0.0)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = np.where(has_key, e / e.sum(axis=-1, keepdims=True), 0.0)
    return weights @ V, weights


def sdpa_calls_pytorch(Q, K, V, mask=None):
    """Hands the work to PyTorch's own attention, which chapter 01 forbids."""
    import torch
    import torch.nn.functional as F

    q, k, v = (torch.from_numpy(np.ascontiguousarray(a)) for a in (Q, K, V))
    m = None if mask is None else torch.from_numpy(np.ascontiguousarray(mask))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=m)
    return out.numpy(), None


def softmax_from_the_reference(x, axis=-1):
    """Imports the book's reference softmax, which the grader has on its PYTHONPATH (the test
    puts the checkout there), and copies its answer; raises when no import finds it. The grader
    refuses it before it runs (a way into mhsa_ref), and the sandbox could not import it anyway."""
    import importlib

    for name in ("mhsa_ref.chapters.ch01.reference", "mhsa_ref.chapters.ch01", "mhsa_ref"):
        try:
            return importlib.import_module(name).softmax(x, axis=axis)
        except Exception:
            pass
    raise ImportError("no reference to copy from")


def softmax_forges_the_channel(x, axis=-1):
    """Writes a made-up "all passed" outcome into every open file descriptor, hoping one is the
    grader's result pipe, then returns nothing useful."""
    fake = json.dumps({"kind": "outcome", "status": "returned", "ending": "returned", "passed": True,
                       "blobs": []}).encode() + b"\n"
    for fd in range(1, 256):
        try:
            os.write(fd, fake)
        except OSError:
            pass
    return None
