"""The chapter-04 checks are discriminating: right code passes, each known mistake is named.

Every learner-style function below is written independently of the misconception variants in
``mhsa_ref/exercises/ch04.py`` (none are imported): loops over heads with slicing and
np.concatenate / np.stack, np.einsum, np.swapaxes and np.moveaxis instead of transpose,
per-head blocks of W_o. When the judge names one of them it has matched *behaviour*.

Sections:
1. correct implementations pass under several seeds;
2. each wrong implementation fails and is named with the right misconception id;
3. the cases contain what the misconceptions need; the @exercise fallback;
4. what check() prints;
5. the parameter count of multi-head attention does not depend on the number of heads.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from mhsa_ref import exercises
from mhsa_ref import heads as ref
from mhsa_ref.checks import check, evaluate, exercise, format_verdict

SPLIT = "04.split_heads"
MERGE = "04.merge_heads"
MHA = "04.multi_head_attention"
SEEDS = (0, 1, 2, 12345)


# ============================================================================================
# Learner-style split_heads
# ============================================================================================


def split_stack_slices(X, num_heads):
    """A loop over heads: head i is the slice of columns i*d_h:(i+1)*d_h, stacked on axis 1."""
    d_h = X.shape[-1] // num_heads
    return np.stack([X[:, :, i * d_h:(i + 1) * d_h] for i in range(num_heads)], axis=1)


def split_swapaxes(X, num_heads):
    B, L, d = X.shape
    return np.swapaxes(np.reshape(X, (B, L, num_heads, -1)), 1, 2).copy()


def split_moveaxis(X, num_heads):
    return np.moveaxis(X.reshape(*X.shape[:2], num_heads, X.shape[2] // num_heads), 2, 1)


CORRECT_SPLIT = [ref.split_heads, split_stack_slices, split_swapaxes, split_moveaxis]


def split_plain_reshape(X, num_heads):
    B, L, d = X.shape
    return np.reshape(X, (B, num_heads, L, -1))  # same shape, scrambled heads


def split_strided(X, num_heads):
    """Head i takes every num_heads-th column, starting at i (a strided slice)."""
    return np.stack([X[..., i::num_heads] for i in range(num_heads)], axis=1)


def split_float32(X, num_heads):
    return split_stack_slices(X, num_heads).astype(np.float32)


# ============================================================================================
# Learner-style merge_heads
# ============================================================================================


def merge_concatenate(X):
    """Loop over heads and concatenate them along the feature axis."""
    return np.concatenate([X[:, i] for i in range(X.shape[1])], axis=-1)


def merge_swapaxes(X):
    B, h, L, d_h = X.shape
    return np.swapaxes(X, 1, 2).reshape(B, L, -1)


def merge_loops(X):
    """Fills the output entry by entry with Python loops."""
    B, h, L, d_h = X.shape
    out = np.zeros((B, L, h * d_h))
    for b in range(B):
        for i in range(h):
            for t in range(L):
                out[b, t, i * d_h:(i + 1) * d_h] = X[b, i, t]
    return out


CORRECT_MERGE = [ref.merge_heads, merge_concatenate, merge_swapaxes, merge_loops]


def merge_plain_reshape(X):
    B, h, L, d_h = X.shape
    return np.reshape(X, (B, L, h * d_h))


def merge_interleave_loop(X):
    """Puts element j of head i in column j*h + i (the heads woven together)."""
    B, h, L, d_h = X.shape
    out = np.empty((B, L, h * d_h))
    for i in range(h):
        out[..., i::h] = X[:, i]
    return out


def merge_reversed(X):
    return np.concatenate([X[:, i] for i in reversed(range(X.shape[1]))], axis=-1)


def merge_float32(X):
    return merge_concatenate(X).astype(np.float32)


# ============================================================================================
# Learner-style multi_head_attention
# ============================================================================================


def _attend(Q, K, V, mask, scale):
    """Batched masked attention (the learner's own from chapter 01); empty rows give zeros."""
    s = np.einsum("...qd,...kd->...qk", Q, K) / scale
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    top = np.max(s, axis=-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(top), top, 0.0))
    z = e.sum(axis=-1, keepdims=True)
    w = np.divide(e, z, out=np.zeros_like(e), where=z > 0)
    return w @ V, w


def mha_loop_over_heads(X, W_q, W_k, W_v, W_o, num_heads, mask=None):
    """Per-head slices of the weight matrices, one attention per head, then concatenate."""
    B, L, d = X.shape
    d_h = d // num_heads
    m = None if mask is None else np.broadcast_to(mask, (B, num_heads, L, L))
    outs, ws = [], []
    for i in range(num_heads):
        cols = slice(i * d_h, (i + 1) * d_h)
        o, w = _attend(X @ W_q[:, cols], X @ W_k[:, cols], X @ W_v[:, cols],
                       None if m is None else m[:, i], math.sqrt(d_h))
        outs.append(o)
        ws.append(w)
    return np.concatenate(outs, axis=-1) @ W_o, np.stack(ws, axis=1)


def mha_einsum(X, W_q, W_k, W_v, W_o, num_heads, mask=None):
    """Per-head weight tensors (d, h, d_h) and einsum throughout; W_o as h blocks of rows."""
    B, L, d = X.shape
    h = num_heads
    d_h = d // h
    Wq, Wk, Wv = (W.reshape(d, h, d_h) for W in (W_q, W_k, W_v))
    Q = np.einsum("bld,dhe->bhle", X, Wq)
    K = np.einsum("bld,dhe->bhle", X, Wk)
    V = np.einsum("bld,dhe->bhle", X, Wv)
    heads, w = _attend(Q, K, V, mask, np.sqrt(d_h))
    out = np.einsum("bhle,hef->blf", heads, W_o.reshape(h, d_h, d))
    return out, w


def mha_sum_of_heads(X, W_q, W_k, W_v, W_o, num_heads, mask=None):
    """Concatenate-then-project written as a sum: out = sum_i head_i @ W_o[rows of head i]."""
    B, L, d = X.shape
    d_h = d // num_heads
    Q = np.swapaxes((X @ W_q).reshape(B, L, num_heads, d_h), 1, 2)
    K = np.swapaxes((X @ W_k).reshape(B, L, num_heads, d_h), 1, 2)
    V = np.swapaxes((X @ W_v).reshape(B, L, num_heads, d_h), 1, 2)
    heads, w = _attend(Q, K, V, mask, math.sqrt(d_h))
    out = np.zeros((B, L, d))
    for i in range(num_heads):
        out += heads[:, i] @ W_o[i * d_h:(i + 1) * d_h]
    return out, w


CORRECT_MHA = [ref.multi_head_attention, mha_loop_over_heads, mha_einsum, mha_sum_of_heads]


def mha_split_reshape(X, W_q, W_k, W_v, W_o, num_heads, mask=None):
    """Splits with one reshape straight to (B, h, L, d_h); merges correctly."""
    B, L, d = X.shape
    d_h = d // num_heads
    Q, K, V = ((X @ W).reshape(B, num_heads, L, d_h) for W in (W_q, W_k, W_v))
    heads, w = _attend(Q, K, V, mask, math.sqrt(d_h))
    return merge_concatenate(heads) @ W_o, w


def mha_merge_reshape(X, W_q, W_k, W_v, W_o, num_heads, mask=None):
    """Splits correctly; merges with one reshape of (B, h, L, d_h) to (B, L, d)."""
    B, L, d = X.shape
    d_h = d // num_heads
    Q, K, V = (split_stack_slices(X @ W, num_heads) for W in (W_q, W_k, W_v))
    heads, w = _attend(Q, K, V, mask, math.sqrt(d_h))
    return heads.reshape(B, L, d) @ W_o, w


def mha_strided_heads(X, W_q, W_k, W_v, W_o, num_heads, mask=None):
    """Head i uses columns i, i+h, i+2h, ... of the projections (and concatenates normally)."""
    B, L, d = X.shape
    m = None if mask is None else np.broadcast_to(mask, (B, num_heads, L, L))
    outs, ws = [], []
    for i in range(num_heads):
        o, w = _attend(X @ W_q[:, i::num_heads], X @ W_k[:, i::num_heads], X @ W_v[:, i::num_heads],
                       None if m is None else m[:, i], math.sqrt(d // num_heads))
        outs.append(o)
        ws.append(w)
    return np.concatenate(outs, axis=-1) @ W_o, np.stack(ws, axis=1)


def mha_scale_d_model(X, W_q, W_k, W_v, W_o, num_heads, mask=None):
    B, L, d = X.shape
    Q, K, V = (split_swapaxes(X @ W, num_heads) for W in (W_q, W_k, W_v))
    heads, w = _attend(Q, K, V, mask, math.sqrt(d))  # the model width, not the head width
    return merge_swapaxes(heads) @ W_o, w


def mha_no_output_projection(X, W_q, W_k, W_v, W_o, num_heads, mask=None):
    B, L, d = X.shape
    Q, K, V = (split_swapaxes(X @ W, num_heads) for W in (W_q, W_k, W_v))
    heads, w = _attend(Q, K, V, mask, math.sqrt(d // num_heads))
    return merge_swapaxes(heads), w  # W_o forgotten


def mha_torch_layout(X, W_q, W_k, W_v, W_o, num_heads, mask=None):
    """Treats every weight as torch.nn.Linear's (d_out, d_in): x @ W.T, via einsum."""
    B, L, d = X.shape
    Q, K, V = (np.einsum("bli,oi->blo", X, W) for W in (W_q, W_k, W_v))
    Q, K, V = (split_moveaxis(A, num_heads) for A in (Q, K, V))
    heads, w = _attend(Q, K, V, mask, math.sqrt(d // num_heads))
    return np.einsum("bli,oi->blo", merge_concatenate(heads), W_o), w


def mha_reversed_heads(X, W_q, W_k, W_v, W_o, num_heads, mask=None):
    B, L, d = X.shape
    Q, K, V = (split_stack_slices(X @ W, num_heads) for W in (W_q, W_k, W_v))
    heads, w = _attend(Q, K, V, mask, math.sqrt(d // num_heads))
    return merge_reversed(heads) @ W_o, w


def mha_float32(X, W_q, W_k, W_v, W_o, num_heads, mask=None):
    out, w = mha_loop_over_heads(X, W_q, W_k, W_v, W_o, num_heads, mask)
    return out.astype(np.float32), w.astype(np.float32)


def mha_in_place(X, W_q, W_k, W_v, W_o, num_heads, mask=None):
    """Right answer, but folds the scale into the caller's W_q."""
    W_q /= math.sqrt(X.shape[-1] // num_heads)
    B, L, d = X.shape
    Q, K, V = (split_swapaxes(X @ W, num_heads) for W in (W_q, W_k, W_v))
    heads, w = _attend(Q, K, V, mask, 1.0)
    return merge_swapaxes(heads) @ W_o, w


# ============================================================================================
# 1. Correct implementations pass, under every seed
# ============================================================================================


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(
    "exercise_id, fn",
    [(SPLIT, f) for f in CORRECT_SPLIT] + [(MERGE, f) for f in CORRECT_MERGE] + [(MHA, f) for f in CORRECT_MHA],
    ids=lambda p: getattr(p, "__name__", p),
)
def test_correct_implementations_pass(exercise_id, fn, seed):
    v = evaluate(fn, exercise_id, seed=seed)
    assert (v.status, v.misconception) == ("passed", None), format_verdict(v)


# ============================================================================================
# 2. Each wrong implementation fails with the right misconception named
# ============================================================================================

WRONG = [
    (SPLIT, "split-reshape-without-transpose", split_plain_reshape),
    (SPLIT, "heads-interleaved", split_strided),
    (SPLIT, "float32-output", split_float32),
    (MERGE, "merge-reshape-without-transpose", merge_plain_reshape),
    (MERGE, "heads-interleaved", merge_interleave_loop),
    (MERGE, "heads-concatenated-reversed", merge_reversed),
    (MERGE, "float32-output", merge_float32),
    (MHA, "split-reshape-without-transpose", mha_split_reshape),
    (MHA, "merge-reshape-without-transpose", mha_merge_reshape),
    (MHA, "heads-interleaved", mha_strided_heads),
    (MHA, "mha-scale-by-sqrt-d-model", mha_scale_d_model),
    (MHA, "mha-missing-output-projection", mha_no_output_projection),
    (MHA, "mha-weights-transposed", mha_torch_layout),
    (MHA, "heads-concatenated-reversed", mha_reversed_heads),
    (MHA, "float32-output", mha_float32),
    (MHA, "input-modified-in-place", mha_in_place),
]


@pytest.mark.parametrize("seed", (0, 1))
@pytest.mark.parametrize(
    "exercise_id, mid, fn", WRONG, ids=[f"{mid}/{fn.__name__}" for _, mid, fn in WRONG]
)
def test_wrong_implementation_is_named(exercise_id, mid, fn, seed):
    v = evaluate(fn, exercise_id, seed=seed)
    shown = format_verdict(v)
    assert v.status == "failed", shown
    assert v.misconception == mid, shown
    assert f"[{mid}]" in shown


def test_every_listed_misconception_has_a_wrong_implementation_here():
    tested = {(ex_id, mid) for ex_id, mid, _ in WRONG}
    for ex_id in (SPLIT, MERGE, MHA):
        for mis in exercises.get(ex_id).misconceptions:
            if mis.id != "input-modified-in-place" or ex_id == MHA:
                assert (ex_id, mis.id) in tested, (ex_id, mis.id)


# ============================================================================================
# 3. The cases contain what the misconceptions need; the fallback
# ============================================================================================


def test_mha_fixed_cases_cover_heads_masks_and_shapes():
    cases = [c for c in exercises.get(MHA).cases(0) if not c.name.startswith("random")]
    heads = {c.args[5] for c in cases}
    assert {1, 2, 4} <= heads
    assert all(c.args[0].shape[0] > 1 for c in cases)  # B > 1 everywhere
    assert any(c.args[0].shape[1] != c.args[0].shape[2] // c.args[5] for c in cases)  # L != d_h
    masked = [c for c in cases if c.args[6] is not None]
    assert masked
    # A query that no key may reach, in some head: its weights must be zero.
    assert any(not np.broadcast_to(c.args[6], (c.args[0].shape[0], c.args[5]) + (c.args[0].shape[1],) * 2)
               .any(axis=-1).all() for c in masked)
    for c in cases:  # weights are not symmetric, so X @ W.T differs from X @ W
        assert all(not np.allclose(W, W.T) for W in c.args[1:5])


def test_unsolved_mha_falls_back_and_is_not_graded(capsys):
    @exercise
    def multi_head_attention(X, W_q, W_k, W_v, W_o, num_heads, mask=None):
        raise NotImplementedError("your code here")

    case = exercises.get(MHA).cases(0)[0]
    got = multi_head_attention(*case.args)
    want = ref.multi_head_attention(*case.args)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)
    assert "note: multi_head_attention is not implemented yet" in capsys.readouterr().out
    assert evaluate(multi_head_attention).status == "not_implemented"


def test_mha_built_on_learner_split_and_merge_is_judged_on_them():
    # The notebook's multi_head_attention calls the learner's split_heads and merge_heads:
    # a wrong merge is named even though the mha code itself is right.
    def multi_head_attention(X, W_q, W_k, W_v, W_o, num_heads, mask=None):
        B, L, d = X.shape
        Q, K, V = (split_swapaxes(X @ W, num_heads) for W in (W_q, W_k, W_v))
        heads, w = _attend(Q, K, V, mask, math.sqrt(d // num_heads))
        return merge_plain_reshape(heads) @ W_o, w

    v = evaluate(multi_head_attention)
    assert (v.status, v.misconception) == ("failed", "merge-reshape-without-transpose")


# ============================================================================================
# 4. What check() prints
# ============================================================================================


@pytest.mark.parametrize("fn", [ref.split_heads, ref.merge_heads, ref.multi_head_attention])
def test_check_prints_one_passed_line(capsys, fn):
    check(fn)
    out = capsys.readouterr().out
    assert out.startswith(f"✅ 04.{fn.__name__}: passed")
    assert out.count("\n") == 1


def test_check_names_the_scrambled_split(capsys):
    check(split_plain_reshape, SPLIT)
    out = capsys.readouterr().out
    assert out.startswith("❌ 04.split_heads: not yet right")
    assert "[split-reshape-without-transpose]" in out
    assert "transpose(0, 2, 1, 3)" in out


def test_check_hints_at_the_part_that_is_wrong(capsys):
    # Not a listed mistake: the right attention, then W_o applied twice. The property hint
    # says the weights are right, so the bug is after attention.
    def multi_head_attention(X, W_q, W_k, W_v, W_o, num_heads, mask=None):
        out, w = ref.multi_head_attention(X, W_q, W_k, W_v, W_o, num_heads, mask)
        return out @ W_o, w

    check(multi_head_attention)
    out = capsys.readouterr().out
    assert out.startswith("❌ 04.multi_head_attention: not yet right")
    assert "Likely mistake" not in out
    assert "Hint: your attention weights are right in every head" in out


def test_check_hints_which_head_of_split_is_wrong(capsys):
    def split_heads(X, num_heads):  # head 0 right, the others from the wrong columns
        good = ref.split_heads(X, num_heads)
        good[:, 1:] = good[:, :1]
        return good

    check(split_heads)
    out = capsys.readouterr().out
    assert "Likely mistake" not in out
    assert "Hint: head 1 should be X[...," in out


# ============================================================================================
# 5. Parameter count: 4 d^2 for every number of heads
# ============================================================================================


def _mha_parameter_count(d, h):
    """Count the parameters of multi-head attention built head by head (no biases)."""
    d_h = d // h
    per_head = 3 * d * d_h  # this head's columns of W_q, W_k, W_v
    w_o_rows = d_h * d  # this head's rows of W_o
    return h * (per_head + w_o_rows)


@pytest.mark.parametrize("d", [12, 64, 768])
def test_parameter_count_equals_single_head_for_every_h(d):
    single = _mha_parameter_count(d, 1)
    assert single == 4 * d * d
    for h in [k for k in range(1, d + 1) if d % k == 0]:
        assert _mha_parameter_count(d, h) == single, h


def test_reference_uses_exactly_four_d_by_d_matrices():
    # The reference accepts four (d, d) matrices for every h and nothing else.
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1, 3, 12))
    W = rng.normal(size=(12, 12))
    for h in (1, 2, 3, 4, 6, 12):
        out, w = ref.multi_head_attention(X, W, W, W, W, h)
        assert out.shape == (1, 3, 12) and w.shape == (1, h, 3, 3)
