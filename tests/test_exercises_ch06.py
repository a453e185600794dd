"""The chapter-06 checks are discriminating: right code passes, each known mistake is named.

Every learner-style function and module below is written independently of the reference
(``mhsa_ref.norm`` and ``mhsa_ref.block`` are not imported) and of the misconception variants in
``mhsa_ref/exercises/ch06.py`` and ``ch06_mistakes.py``: ``np.var``, an explicit mean of
squares, E[x^2] - E[x]^2, ``np.std``, a loop over rows, torch's ``var``; blocks written with
sublayer helper methods, with a residual wrapper, with their own attention module and their own
GELU. When the judge names one of them it has matched *behaviour*.

Sections:
1. correct implementations pass under several seeds;
2. each wrong implementation fails and is named with the right misconception id;
3. feedback: hints, gradient-only mistakes, wrong submodule names, what ``check`` prints;
4. the cases contain what the misconceptions need.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from mhsa_ref import exercises
from mhsa_ref.checks import check, evaluate, format_verdict

LN = "06.layer_norm"
BLOCK = "06.TransformerBlock"
SEEDS = (0, 1, 2, 7)


# ============================================================================================
# Learner-style layer_norm: correct
# ============================================================================================


def ln_np_var(x, gamma, beta, eps=1e-5):
    mu = np.mean(x, axis=-1, keepdims=True)
    var = np.var(x, axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * gamma + beta


def ln_mean_of_squares(x, gamma, beta, eps=1e-5):
    """The variance spelled out: the mean of the squared deviations (divide by d)."""
    d = x.shape[-1]
    centered = x - x.sum(axis=-1, keepdims=True) / d
    var = (centered * centered).sum(axis=-1, keepdims=True) / d
    return gamma * (centered / np.sqrt(var + eps)) + beta


def ln_moments(x, gamma, beta, eps=1e-5):
    """var = E[x^2] - E[x]^2, clipped at 0 (rounding can make a constant row's slightly < 0)."""
    m1 = np.mean(x, axis=-1, keepdims=True)
    m2 = np.mean(x ** 2, axis=-1, keepdims=True)
    var = np.maximum(m2 - m1 ** 2, 0.0)
    return (x - m1) * (1.0 / np.sqrt(var + eps)) * gamma + beta


def ln_np_std(x, gamma, beta, eps=1e-5):
    """np.std is the biased standard deviation; sqrt(std**2 + eps) keeps eps inside the root."""
    std = np.std(x, axis=-1, keepdims=True)
    return (x - x.mean(axis=-1, keepdims=True)) / np.sqrt(std ** 2 + eps) * gamma + beta


def ln_row_loop(x, gamma, beta, eps=1e-5):
    """One vector at a time over x reshaped to (N, d)."""
    rows = x.reshape(-1, x.shape[-1])
    out = np.empty_like(rows)
    for i, row in enumerate(rows):
        c = row - row.mean()
        out[i] = c / math.sqrt(float(np.dot(c, c)) / len(row) + eps) * gamma + beta
    return out.reshape(x.shape)


CORRECT_LN = [ln_np_var, ln_mean_of_squares, ln_moments, ln_np_std, ln_row_loop]


# ============================================================================================
# Learner-style layer_norm: wrong
# ============================================================================================


def ln_divide_by_d_minus_1(x, gamma, beta, eps=1e-5):
    d = x.shape[-1]
    c = x - x.mean(axis=-1, keepdims=True)
    var = (c ** 2).sum(axis=-1, keepdims=True) / (d - 1)
    return c / np.sqrt(var + eps) * gamma + beta


def ln_torch_var(x, gamma, beta, eps=1e-5):
    """torch.var defaults to the unbiased estimate (correction=1)."""
    t = torch.from_numpy(x)
    mu = t.mean(dim=-1, keepdim=True)
    var = t.var(dim=-1, keepdim=True)
    return ((t - mu) / torch.sqrt(var + eps)).numpy() * gamma + beta


def ln_std_plus_eps(x, gamma, beta, eps=1e-5):
    return (x - x.mean(axis=-1, keepdims=True)) / (x.std(axis=-1, keepdims=True) + eps) * gamma + beta


def ln_axis_0(x, gamma, beta, eps=1e-5):
    """Batch-norm style: statistics over the first axis."""
    mu = x.mean(axis=0, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=0, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * gamma + beta


def ln_whole_array(x, gamma, beta, eps=1e-5):
    return (x - np.mean(x)) / np.sqrt(np.var(x) + eps) * gamma + beta


def ln_no_affine(x, gamma, beta, eps=1e-5):
    return (x - x.mean(axis=-1, keepdims=True)) / np.sqrt(x.var(axis=-1, keepdims=True) + eps)


def ln_in_place(x, gamma, beta, eps=1e-5):
    """The right numbers, computed in the caller's array."""
    x -= x.mean(axis=-1, keepdims=True)
    x /= np.sqrt((x ** 2).mean(axis=-1, keepdims=True) + eps)
    return x * gamma + beta


def ln_float32(x, gamma, beta, eps=1e-5):
    return ln_np_var(x.astype(np.float32), gamma.astype(np.float32), beta.astype(np.float32), np.float32(eps))


WRONG_LN = [
    ("layer-norm-unbiased-variance", ln_divide_by_d_minus_1),
    ("layer-norm-unbiased-variance", ln_torch_var),
    ("layer-norm-eps-outside-sqrt", ln_std_plus_eps),
    ("layer-norm-wrong-axis", ln_axis_0),
    ("layer-norm-wrong-axis", ln_whole_array),
    ("layer-norm-ignores-gamma-beta", ln_no_affine),
    ("input-modified-in-place", ln_in_place),
    ("float32-output", ln_float32),
]


# ============================================================================================
# Learner-style TransformerBlock: correct
# ============================================================================================


class Attention(nn.Module):
    """The learner's chapter-05 module: SDPA, rows with no allowed key set to zero."""

    def __init__(self, d_model, num_heads, dropout=0.0):
        super().__init__()
        self.h, self.p = num_heads, dropout
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, x, mask=None):
        B, L, d = x.shape
        q, k, v = (W(x).view(B, L, self.h, d // self.h).transpose(1, 2) for W in (self.W_q, self.W_k, self.W_v))
        heads = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=self.p if self.training else 0.0)
        if mask is not None:
            seen = torch.broadcast_to(mask, (B, self.h, L, L)).any(dim=-1, keepdim=True)
            heads = heads.masked_fill(~seen, 0.0)
        return self.W_o(heads.transpose(1, 2).reshape(B, L, d))


class _Parts(nn.Module):
    """The contract's submodules; subclasses write forward."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=True, act=None):
        super().__init__()
        self.norm_first = norm_first
        self.attn = Attention(d_model, num_heads, dropout)
        self.ln1 = nn.LayerNorm(d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), act or nn.GELU(), nn.Linear(d_ff, d_model))
        self.dropout = nn.Dropout(dropout)


class BlockHelpers(_Parts):
    """Sublayer helper methods, one forward for both placements."""

    def _sa(self, x, mask):
        return self.dropout(self.attn(x, mask))

    def _mlp(self, x):
        return self.dropout(self.ff(x))

    def forward(self, x, mask=None):
        if self.norm_first:
            x = x + self._sa(self.ln1(x), mask)
            x = x + self._mlp(self.ln2(x))
        else:
            x = self.ln1(x + self._sa(x, mask))
            x = self.ln2(x + self._mlp(x))
        return x


def residual(x, sublayer, norm, pre):
    """One residual sublayer: Pre-LN x + f(norm(x)), Post-LN norm(x + f(x))."""
    return x + sublayer(norm(x)) if pre else norm(x + sublayer(x))


class BlockResidualWrapper(_Parts):
    def forward(self, x, mask=None):
        x = residual(x, lambda t: self.dropout(self.attn(t, mask)), self.ln1, self.norm_first)
        return residual(x, lambda t: self.dropout(self.ff(t)), self.ln2, self.norm_first)


class ExactGELU(nn.Module):
    """x * Phi(x) with the error function, the exact GELU, written out."""

    def forward(self, x):
        return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


class BlockFunctionalNorms(_Parts):
    """F.layer_norm with ln1's and ln2's parameters; the learner's own exact GELU."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=True):
        super().__init__(d_model, num_heads, d_ff, dropout, norm_first, act=ExactGELU())

    def norm(self, ln, x):
        return F.layer_norm(x, ln.normalized_shape, ln.weight, ln.bias, ln.eps)

    def forward(self, x, mask=None):
        if not self.norm_first:
            h = self.norm(self.ln1, x + self.attn(x, mask))
            return self.norm(self.ln2, h + self.ff(h))
        h = x + self.attn(self.norm(self.ln1, x), mask)
        return h + self.ff(self.norm(self.ln2, h))


CORRECT_BLOCK = [BlockHelpers, BlockResidualWrapper, BlockFunctionalNorms]


# ============================================================================================
# Learner-style TransformerBlock: wrong
# ============================================================================================


class PostLNAlways(_Parts):
    """Stores norm_first but never reads it: the original Transformer's Post-LN."""

    def forward(self, x, mask=None):
        x = self.ln1(x + self.attn(x, mask))
        return self.ln2(x + self.ff(x))


class BranchesSwapped(BlockHelpers):
    """`if not self.norm_first:` where `if self.norm_first:` was meant."""

    def forward(self, x, mask=None):
        if not self.norm_first:
            x = x + self._sa(self.ln1(x), mask)
            return x + self._mlp(self.ln2(x))
        x = self.ln1(x + self._sa(x, mask))
        return self.ln2(x + self._mlp(x))


class PreLNAlways(_Parts):
    def forward(self, x, mask=None):
        x = x + self.attn(self.ln1(x), mask)
        return x + self.ff(self.ln2(x))


class NoResidualAroundAttention(_Parts):
    def forward(self, x, mask=None):
        if self.norm_first:
            x = self.attn(self.ln1(x), mask)
            return x + self.ff(self.ln2(x))
        x = self.ln1(self.attn(x, mask))
        return self.ln2(x + self.ff(x))


class NoResidualAroundFF(_Parts):
    def forward(self, x, mask=None):
        if self.norm_first:
            x = x + self.attn(self.ln1(x), mask)
            return self.ff(self.ln2(x))
        x = self.ln1(x + self.attn(x, mask))
        return self.ln2(self.ff(x))


class NoResiduals(_Parts):
    def forward(self, x, mask=None):
        pre = self.norm_first
        x = self.attn(self.ln1(x), mask) if pre else self.ln1(self.attn(x, mask))
        return self.ff(self.ln2(x)) if pre else self.ln2(self.ff(x))


class ReLUBlock(BlockHelpers):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=True):
        super().__init__(d_model, num_heads, d_ff, dropout, norm_first, act=nn.ReLU())


class TanhGELU(nn.Module):
    """GPT-2's approximation, written out."""

    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


class TanhGELUBlock(BlockResidualWrapper):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=True):
        super().__init__(d_model, num_heads, d_ff, dropout, norm_first, act=TanhGELU())


class LN1Twice(BlockResidualWrapper):
    def forward(self, x, mask=None):
        x = residual(x, lambda t: self.attn(t, mask), self.ln1, self.norm_first)
        return residual(x, self.ff, self.ln1, self.norm_first)  # ln1 again


class MaskDropped(BlockHelpers):
    def _sa(self, x, mask):
        return self.dropout(self.attn(x))  # forgot to hand the mask on


WRONG_BLOCK = [
    ("block-mask-not-passed", MaskDropped),
    ("block-post-ln-when-pre-ln-asked", PostLNAlways),
    ("block-post-ln-when-pre-ln-asked", BranchesSwapped),
    ("block-pre-ln-when-post-ln-asked", PreLNAlways),
    ("block-missing-residual", NoResidualAroundAttention),
    ("block-missing-residual", NoResidualAroundFF),
    ("block-missing-residual", NoResiduals),
    ("block-relu-instead-of-gelu", ReLUBlock),
    ("block-gelu-tanh-approximation", TanhGELUBlock),
    ("block-one-layernorm-for-both", LN1Twice),
]


# ============================================================================================
# 1. Correct implementations pass, under every seed
# ============================================================================================


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(
    "exercise_id, fn",
    [(LN, f) for f in CORRECT_LN] + [(BLOCK, c) for c in CORRECT_BLOCK],
    ids=lambda p: getattr(p, "__name__", p),
)
def test_correct_implementations_pass(exercise_id, fn, seed):
    v = evaluate(fn, exercise_id, seed=seed)
    assert (v.status, v.misconception) == ("passed", None), format_verdict(v)


@pytest.mark.parametrize("cls", CORRECT_BLOCK, ids=lambda c: c.__name__)
def test_correct_blocks_have_the_contract_state_dict(cls):
    case = exercises.get(BLOCK).cases(0)[0]
    init, state = case.args[0], case.args[1]
    assert sorted(cls(**init).state_dict()) == sorted(state)


# ============================================================================================
# 2. Each wrong implementation fails with the right misconception named
# ============================================================================================

WRONG = [(LN, mid, f) for mid, f in WRONG_LN] + [(BLOCK, mid, c) for mid, c in WRONG_BLOCK]


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
    for ex_id in (LN, BLOCK):
        for mis in exercises.get(ex_id).misconceptions:
            assert (ex_id, mis.id) in tested, (ex_id, mis.id)


def test_in_place_feedback_names_the_argument():
    v = evaluate(ln_in_place, LN)
    assert "your function modified `x` in place" in v.feedback
    assert "x = x - ..." in v.feedback


def test_eps_feedback_says_inside_the_sqrt():
    v = evaluate(ln_std_plus_eps, LN)
    assert "sqrt(var + eps), not by sqrt(var) + eps" in v.feedback


def test_post_ln_feedback_points_at_norm_first():
    v = evaluate(PostLNAlways, BLOCK)
    assert v.case.startswith("Pre-LN")  # the first case that tells the two apart
    assert "if self.norm_first:" in v.feedback


# ============================================================================================
# 3. Feedback: hints, gradient-only mistakes, names, check()
# ============================================================================================


def test_unlisted_layer_norm_mistake_gets_the_mean_hint():
    # Not a listed mistake: centred over the batch axis, scaled by the per-vector deviation.
    def layer_norm(x, gamma, beta, eps=1e-5):
        c = x - x.mean(axis=0, keepdims=True)
        return c / np.sqrt(x.var(axis=-1, keepdims=True) + eps) * gamma + beta

    v = evaluate(layer_norm, LN)
    assert (v.status, v.misconception) == ("failed", None), format_verdict(v)
    assert "Hint: after undoing gamma and beta, your vectors do not have mean 0" in v.feedback


def test_layer_norm_error_is_reported_with_its_line():
    def layer_norm(x, gamma, beta, eps=1e-5):
        return (x - x.mean(axis=1, keepdims=True)) * gamma + beta  # 1-D inputs have no axis 1

    v = evaluate(layer_norm, LN)
    assert v.status == "error", format_verdict(v)
    assert "AxisError" in v.feedback or "axis 1 is out of bounds" in v.feedback
    assert "x.mean(axis=1, keepdims=True)" in v.feedback  # the line it came from


class LN2Frozen(BlockHelpers):
    """The right output, but ln2 is applied with detached parameters: never trained."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        ln2 = self.ln2

        def frozen(x):
            return F.layer_norm(x, ln2.normalized_shape, ln2.weight.detach(), ln2.bias.detach(), ln2.eps)

        self._frozen = frozen

    def _mlp(self, x):
        return self.ff(x)

    def forward(self, x, mask=None):
        if self.norm_first:
            x = x + self._sa(self.ln1(x), mask)
            return x + self._mlp(self._frozen(x))
        x = self.ln1(x + self._sa(x, mask))
        return self._frozen(x + self._mlp(x))


def test_gradient_only_mistake_names_the_parameter():
    v = evaluate(LN2Frozen, BLOCK)
    assert (v.status, v.misconception) == ("failed", None), format_verdict(v)
    assert "`ln2.bias.grad` has shape (0,)" in v.feedback


class Norm1Names(BlockHelpers):
    """nn.TransformerEncoderLayer's names (norm1, norm2): the state dict does not load."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.norm1, self.norm2 = self.ln1, self.ln2
        del self.ln1, self.ln2

    def forward(self, x, mask=None):
        raise AssertionError("not reached: loading the state dict fails first")


def test_wrong_submodule_name_names_the_missing_key():
    v = evaluate(Norm1Names, BLOCK)
    assert v.status == "error", format_verdict(v)
    assert "Missing key(s)" in v.feedback
    assert "norm1.weight" in v.feedback and "ln1.weight" in v.feedback


def test_check_prints_one_passed_line(capsys):
    check(ln_moments, LN)
    check(BlockResidualWrapper, BLOCK)
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2
    assert out[0].startswith(f"✅ {LN}: passed")
    assert out[1].startswith(f"✅ {BLOCK}: passed")


def test_check_names_the_relu(capsys):
    check(ReLUBlock, BLOCK)
    out = capsys.readouterr().out
    assert out.startswith(f"❌ {BLOCK}: not yet right")
    assert "[block-relu-instead-of-gelu]" in out
    assert "nn.GELU()" in out


# ============================================================================================
# 4. The cases contain what the misconceptions need
# ============================================================================================


def test_layer_norm_cases_separate_the_mistakes():
    cases = exercises.get(LN).cases(0)
    xs = [c.args[0] for c in cases]
    assert any(x.ndim == 3 for x in xs)  # a wrong axis normalizes something else
    assert any(c.args[3] >= 0.1 for c in cases)  # a large eps
    # rows whose variance is close to eps: sqrt(var + eps) and sqrt(var) + eps differ a lot
    assert any(np.any((x.var(axis=-1) > 1e-7) & (x.var(axis=-1) < 1e-4)) for x in xs)
    for c in cases:
        gamma, beta = c.args[1], c.args[2]
        assert not np.allclose(gamma, 1.0) and not np.allclose(beta, 0.0)


def test_block_cases_have_both_placements_masks_and_spread_activations():
    cases = exercises.get(BLOCK).cases(0)
    fixed = [c for c in cases if not c.name.startswith("random")]
    assert {c.args[0]["norm_first"] for c in fixed} == {True, False}
    assert {c.args[0]["norm_first"] for c in fixed if len(c.args[2]) == 2} == {True, False}
    # The feed-forward pre-activations reach where GELU, its tanh form and ReLU disagree.
    seen = []
    for c in fixed:
        block = BlockHelpers(**c.args[0])
        block.load_state_dict({k: torch.from_numpy(v) for k, v in c.args[1].items()})
        block.ff[0].register_forward_hook(lambda mod, inp, out: seen.append(out.detach()))
        with torch.no_grad():
            block(*(torch.from_numpy(a) for a in c.args[2]))
    pre = torch.cat([s.flatten() for s in seen])
    assert pre.min() < -2.5 and pre.max() > 2.5
    assert ((pre > -1) & (pre < 1)).any()
