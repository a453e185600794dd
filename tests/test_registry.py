"""The exercise registry matches DESIGN.md's catalog and is internally consistent."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from mhsa_ref import exercises
from mhsa_ref.judge import call, judge

# From DESIGN.md's catalog: ids and signatures are a contract with tools outside this repository.
CATALOG = {
    "01.softmax": "softmax(x, axis=-1)",
    "01.scaled_dot_product_attention": "scaled_dot_product_attention(Q, K, V, mask=None)",
    "02.softmax_jacobian": "softmax_jacobian(p)",
    "03.causal_mask": "causal_mask(L)",
    "03.padding_mask": "padding_mask(lengths, L)",
    "03.build_attention_mask": "build_attention_mask(lengths, L, causal=False)",
    "04.split_heads": "split_heads(X, num_heads)",
    "04.merge_heads": "merge_heads(X)",
    "04.multi_head_attention": "multi_head_attention(X, W_q, W_k, W_v, W_o, num_heads, mask=None)",
}

ALL = list(exercises.REGISTRY.values())


@pytest.mark.parametrize("exercise_id, signature", CATALOG.items())
def test_catalog_exercises_exist_with_their_signatures(exercise_id, signature):
    ex = exercises.get(exercise_id)
    assert ex.signature == signature
    params = inspect.signature(ex.reference).parameters.values()
    plain = ", ".join(p.name if p.default is p.empty else f"{p.name}={p.default!r}" for p in params)
    assert f"{ex.name}({plain})" == signature, "the reference takes the catalog's parameters"


def test_names_are_unique_and_lookups_agree():
    names = [ex.name for ex in ALL]
    assert len(names) == len(set(names))
    for ex in ALL:
        assert exercises.find_by_name(ex.name) is ex
        assert ex.id == f"{ex.chapter}.{ex.name}"
    with pytest.raises(LookupError, match="not an exercise"):
        exercises.find_by_name("no_such_function")
    with pytest.raises(KeyError, match="known exercises"):
        exercises.get("99.nothing")


@pytest.mark.parametrize("ex", ALL, ids=lambda ex: ex.id)
def test_exercise_is_well_formed(ex):
    assert ex.points > 0
    ids = [m.id for m in ex.misconceptions]
    assert len(ids) == len(set(ids))
    for m in ex.misconceptions:
        assert len(m.message) > 40, f"{m.id}: feedback should explain the mistake and the fix"
    for dep in ex.uses:
        assert dep in exercises.REGISTRY


@pytest.mark.parametrize("ex", ALL, ids=lambda ex: ex.id)
def test_cases_are_reproducible_from_the_seed(ex):
    a, b, c = ex.cases(3), ex.cases(3), ex.cases(4)
    assert [x.name for x in a] == [x.name for x in b]
    for x, y in zip(a, b):
        for u, v in zip(x.args, y.args):
            assert np.array_equal(u, v) if isinstance(u, np.ndarray) else u == v
    # Randomized cases differ between seeds (in an array or in a plain argument such as a length).
    def differs(u, v):
        if isinstance(u, np.ndarray):
            return u.shape != v.shape or not np.array_equal(u, v)
        return u != v

    assert len(a) != len(c) or any(differs(u, v) for x, y in zip(a, c) for u, v in zip(x.args, y.args))


@pytest.mark.parametrize("ex", ALL, ids=lambda ex: ex.id)
@pytest.mark.parametrize("seed", [0, 1, 2, 99])
def test_reference_passes_its_own_judge(ex, seed):
    cases = ex.cases(seed)
    verdict = judge(ex, cases, [call(ex.reference, c, len(ex.outputs)) for c in cases], seed=seed)
    assert verdict.passed, verdict.feedback


@pytest.mark.parametrize("ex", ALL, ids=lambda ex: ex.id)
def test_every_variant_is_caught_by_some_case(ex):
    # A misconception the cases cannot tell from the reference could never be named.
    cases = ex.cases(0)
    reference = [call(ex.reference, c, len(ex.outputs)) for c in cases]
    for mis in ex.misconceptions:
        for variant in mis.variants:
            verdict = judge(ex, cases, [call(variant, c, len(ex.outputs)) for c in cases], reference)
            assert not verdict.passed, f"{mis.id}: variant {variant.__name__} passes every case"
            assert verdict.misconception == mis.id, (mis.id, verdict.misconception, verdict.feedback)
