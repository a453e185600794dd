"""How a module exercise is run on one case: build it, load weights, run forward and backward.

An exercise that asks for an ``nn.Module`` (or for a function that returns one) is not called
directly: a harness builds the module from the case's arguments, loads a state dict of random
weights, runs it forward and backward, and returns the output, the input's gradient and every
parameter's gradient as arrays. The reference and the learner's code go through the same
harness, so they are compared on identical terms.

A function exercise can be run through a harness too: ``run_within_memory`` calls it while
``tracemalloc`` traces NumPy's allocations and adds one output, whether the peak stayed within a
bound the case gives (for "never builds the (L, L) matrix").

A ``Harness`` is plain data (a name and JSON options), so that the grader can send it into the
sandbox; what an exercise expects (the class a converter must return) comes in its options.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .calls import describe


@dataclass(frozen=True)
class Harness:
    name: str  # a key of HARNESSES
    options: dict = field(default_factory=dict)  # keyword arguments of that function (JSON)

    def __call__(self, fn: Any, *args: Any) -> tuple:
        return HARNESSES[self.name](fn, *args, **self.options)

    def as_json(self) -> dict:
        return {"name": self.name, "options": dict(self.options)}


def run_module(cls: Any, init_kwargs: dict, state: dict, inputs: tuple, grad_output: Any) -> tuple:
    """Build ``cls(**init_kwargs)``, load ``state``, run forward and backward.

    Returns the output, the gradient with respect to the first input, then the gradient of every
    parameter in sorted name order (see ``module_output_names``), all as arrays.
    """
    import torch

    torch.manual_seed(0)
    module = cls(**init_kwargs)
    module.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in state.items()}, strict=True)
    return _forward_backward(module, inputs, grad_output)


def run_converter(fn: Any, mha_kwargs: dict, state: dict, inputs: tuple, grad_output: Any,
                  returns: str = "") -> tuple:
    """Build an ``nn.MultiheadAttention`` from ``state``, convert it with ``fn`` and run what comes
    back like ``run_module`` does. ``returns`` names the class the conversion must give."""
    import torch

    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(**mha_kwargs, batch_first=True)
    mha.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in state.items()}, strict=True)
    before = {k: v.clone() for k, v in mha.state_dict().items()}
    module = fn(mha)
    if not isinstance(module, torch.nn.Module) or (returns and type(module).__name__ != returns):
        raise TypeError(f"{fn.__name__} returned {describe(module)}; expected a {returns or 'torch.nn.Module'}")
    changed = [k for k, v in mha.state_dict().items() if not torch.equal(v, before[k])]
    if changed:
        raise ValueError(f"{fn.__name__} changed the given module's {', '.join(changed)} in place; "
                         "copy the weights instead of modifying them")
    return _forward_backward(module, inputs, grad_output)


def run_within_memory(fn: Any, limit_bytes: int, *args: Any) -> tuple:
    """Call ``fn(*args)`` while ``tracemalloc`` traces allocations (NumPy reports its arrays to it).

    For an exercise with one output: returns it followed by ``1.0`` when the peak of the bytes allocated during the
    call stayed within ``limit_bytes``, else ``[0.0]``: a learner who builds a matrix larger than
    the exercise allows gets the right values and a ``0.0``. The learner's code runs in this
    process and could fool the measurement; only the memory flag depends on it, never the values.
    """
    import tracemalloc

    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()  # the peak from here on, not from whatever ran before
    try:
        result = fn(*args)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        if started:
            tracemalloc.stop()
    # The one output stays whole (a tuple returned by mistake is judged as a wrong type); the flag
    # is a 1-element array, which crosses the sandbox's protocol with its shape intact.
    return result, np.array([1.0 if peak <= limit_bytes else 0.0])


HARNESSES = {f.__name__: f for f in (run_module, run_converter, run_within_memory)}


def module_output_names(state: dict) -> tuple[str, ...]:
    """What a harness returns, by name, for a module whose parameters are ``state``."""
    return ("output", "x.grad") + tuple(f"{name}.grad" for name in sorted(state))


def _forward_backward(module: Any, inputs: tuple, grad_output: Any) -> tuple:
    import torch

    module.eval()  # dropout off: grading is deterministic
    xs = [torch.tensor(np.array(a), requires_grad=np.asarray(a).dtype.kind == "f") for a in inputs]
    out = module(*xs)
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"forward returned {describe(out)}; expected a torch.Tensor of shape (B, L, d)")
    again = module(*xs)  # the same path again: only randomness can make it differ
    if isinstance(again, torch.Tensor) and (again.shape != out.shape or not torch.allclose(
            again.detach(), out.detach(), rtol=1e-5, atol=1e-6, equal_nan=True)):
        raise ValueError("forward gave two different outputs for the same input in eval mode; is "
                         "dropout applied when self.training is False?")
    out.backward(torch.from_numpy(np.array(grad_output)))
    grads = [xs[0].grad] + [p.grad for _, p in sorted(module.named_parameters())]
    return (out.detach().numpy(),) + tuple(
        np.zeros(0, np.float32) if g is None else g.detach().numpy() for g in grads
    )
