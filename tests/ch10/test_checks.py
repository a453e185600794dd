"""Chapter 10's checks, beyond the contract every chapter keeps (``tests/test_contract.py``):
the cases hold what the mistakes need, every misconception variant is told apart from the
others, each wrong learner is rejected and named by the matcher on its own, the property that
every pixel appears once, and what ``check`` prints."""

from __future__ import annotations

import numpy as np
import pytest

from mhsa_ref import exercises
from mhsa_ref.chapters.ch10 import reference as ref
from mhsa_ref.checks import check, evaluate, format_verdict
from mhsa_ref.judge import call, diagnose

from .learners import CORRECT, PATCHIFY, WRONG

EX = exercises.get(PATCHIFY)


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_cases_hold_what_the_mistakes_need(seed):
    shapes = [(c.args[0].shape, c.args[1]) for c in EX.cases(seed)]
    grids = [(H // p, W // p) for (_, _, H, W), p in shapes]
    assert any(C > 1 for (_, C, _, _), _ in shapes), "C > 1: the channel order inside a patch"
    assert any(gh > 1 and gw > 1 and gh != gw for gh, gw in grids), "a non-square grid: patch order, H against W"
    assert any(gh > gw for gh, gw in grids) and any(gw > gh for gh, gw in grids), "taller and wider than square"
    assert any(p > 1 and C > 1 and H != W for (_, C, H, W), p in shapes), "channels and a non-square image together"
    assert any(p == 1 for _, p in shapes) and any(p == H == W for (_, _, H, W), p in shapes)
    assert any(B > 1 for (B, _, _, _), _ in shapes)
    assert all(c.args[0].dtype == np.float64 for c in EX.cases(seed))


def test_every_misconception_variant_is_named_as_its_own():
    """Each variant fails, and the first misconception whose variants agree with it is its own:
    no mistake is hidden behind another's name."""
    cases = EX.cases(0)
    for mis in EX.misconceptions:
        for variant in mis.variants:
            outcomes = [call(variant, c) for c in cases]
            assert diagnose(EX, cases, outcomes) == mis.id, (mis.id, variant.__name__)


def _outcomes(fn, seed):
    cases = EX.cases(seed)
    return cases, [call(fn, c) for c in cases]


@pytest.mark.parametrize("mid, fn", [pytest.param(m, f, id=f"{m}/{f.__name__}") for _, m, f in WRONG])
def test_wrong_is_rejected_and_diagnosed(mid, fn):
    """Without the judge's value comparison: some case differs from the reference (or the input
    changes), and the misconception matcher names the right id."""
    cases, got = _outcomes(fn, 1)
    _, want = _outcomes(EX.reference, 1)

    def same(g, w):
        return g.returned and not g.modified and all(
            np.asarray(a).shape == b.shape and np.asarray(a).dtype == b.dtype and np.array_equal(a, b)
            for a, b in zip(g.outputs, w.outputs))

    assert not all(same(g, w) for g, w in zip(got, want)), "this wrong implementation passes"
    if mid == "input-modified-in-place":
        assert any(g.modified for g in got)
    elif mid != "float32-output":
        assert diagnose(EX, cases, got) == mid


@pytest.mark.parametrize("fn", CORRECT[PATCHIFY])
def test_correct_alternatives_agree_with_the_reference_exactly(fn):
    for case in EX.cases(3):
        np.testing.assert_array_equal(fn(*case.fresh_args()), ref.patchify(*case.args))


def test_the_every_pixel_property_speaks_when_values_change():
    def first_entry_zeroed(images, patch_size):  # right layout, one value per patch lost
        out = ref.patchify(images, patch_size)
        out[..., 0] = 0.0
        return out

    v = evaluate(first_entry_zeroed, PATCHIFY)
    assert v.status == "failed"
    assert "exactly one patch" in format_verdict(v)


def test_a_torch_tensor_returned_is_a_wrong_type_not_a_crash():
    import torch

    v = evaluate(lambda images, patch_size: torch.from_numpy(ref.patchify(images, patch_size)), PATCHIFY)
    assert v.status == "failed" and "Tensor" in format_verdict(v)


def test_not_implemented():
    def todo(images, patch_size):
        raise NotImplementedError

    v = evaluate(todo, PATCHIFY)
    assert (v.status, v.misconception) == ("not_implemented", None)


def test_check_prints_passed(capsys):
    check(ref.patchify, PATCHIFY)
    out = capsys.readouterr().out
    assert out.startswith("✅ 10.patchify: passed") and out.count("\n") == 1


@pytest.mark.parametrize("mid, words", [
    ("patch-flattened-channels-first", ["(C, p, p)", "channel axis last"]),
    ("patches-column-major", ["column by column", "n // (W/p)"]),
    ("height-width-swapped", ["H != W"]),
    ("overlapping-patches", ["overlap", "Step"]),
    ("reshape-without-transpose", ["strips"]),
])
def test_check_names_the_mistake_in_the_learners_terms(capsys, mid, words):
    fn = next(f for _, m, f in WRONG if m == mid)
    check(fn, PATCHIFY)
    out = " ".join(capsys.readouterr().out.split())
    assert f"[{mid}]" in out
    for word in words:
        assert word in out


def test_the_grader_refuses_torch_einops_and_the_reference():
    assert {"torch", "einops", "mhsa_ref"} <= set(EX.forbidden)
