"""Calling a learner's code and describing what came back, shared by both sides of the grader.

``check`` (in the notebook) and the sandboxed runner (in the autograder) both use these, so a
learner reads the same words in either place. This module imports only the standard library
and, for module exercises, torch; it holds no reference code, which is why the sandbox may
load it.
"""

from __future__ import annotations

import traceback
import warnings
from typing import Any

import numpy as np


def call(fn: Any, args: tuple, n_outputs: int, harness: Any = None,
         catch: type[BaseException] = Exception) -> tuple[str, Any]:
    """Call ``fn(*args)`` (or ``harness(fn, *args)``) and say what happened.

    Returns ("returned", outputs as a tuple), ("not_implemented", None), ("out_of_memory",
    message) or ("raised", message). With ``n_outputs == 1`` whatever ``fn`` returns is the one
    output, so a stray trailing comma (a 1-tuple) is judged as the wrong type rather than
    silently unpacked. ``catch`` is Exception in a notebook (an interrupt stays an interrupt)
    and BaseException in the sandbox (``sys.exit`` is the learner's error there).
    """
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = harness(fn, *args) if harness else fn(*args)
    except NotImplementedError:
        return "not_implemented", None
    except MemoryError as exc:
        return "out_of_memory", error_message(exc) + where(fn, exc)
    except catch as exc:
        return "raised", error_message(exc) + where(fn, exc)
    return "returned", result if isinstance(result, tuple) and n_outputs != 1 else (result,)


def error_message(exc: BaseException) -> str:
    """"ValueError: shapes do not match", even for an exception whose ``__str__`` fails."""
    try:
        text = str(exc).strip()
    except BaseException:
        text = "(its message could not be shown)"
    return f"{type(exc).__name__}: {text}"


def where(fn: Any, exc: BaseException) -> str:
    """" (line N: `code`)" for the last line of ``fn``'s own file that the error passed through
    (for a class, the file of its methods)."""
    functions = [fn] if not isinstance(fn, type) else [v for v in vars(fn).values() if callable(v)]
    filename = next((f.__code__.co_filename for f in functions if hasattr(f, "__code__")), None)
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == filename]
    if not frames:
        return ""
    frame = frames[-1]
    code = f": `{frame.line.strip()}`" if frame.line else ""
    return f" (line {frame.lineno}{code})"


def describe(value: Any) -> str:
    """What a value that is not a numeric NumPy array is, in the words feedback uses."""
    dtype = getattr(value, "dtype", None)
    if dtype is not None and type(value).__module__.startswith("numpy"):
        return f"an array of dtype {dtype}"
    name = type(value).__name__
    module = type(value).__module__
    return name if module == "builtins" else f"{module.split('.')[0]}.{name}"[:80]


def run_module(cls: Any, init_kwargs: dict, state: dict, inputs: tuple, grad_output: Any) -> tuple:
    """The harness of a module exercise: build ``cls``, load ``state``, run forward and backward.

    Returns the output, the gradient with respect to the first input, then the gradient of every
    parameter in sorted name order (see ``module_output_names``), all as arrays. The same harness
    runs the reference class and the learner's, so they are compared on identical terms.
    """
    import torch

    torch.manual_seed(0)
    module = cls(**init_kwargs)
    module.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in state.items()}, strict=True)
    return _forward_backward(module, inputs, grad_output)


def run_converter(fn: Any, mha_kwargs: dict, state: dict, inputs: tuple, grad_output: Any) -> tuple:
    """The harness of ``from_torch_mha``-style exercises: build an ``nn.MultiheadAttention`` from
    ``state``, convert it with ``fn`` and run what comes back like ``run_module`` does."""
    import torch

    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(**mha_kwargs, batch_first=True)
    mha.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in state.items()}, strict=True)
    before = {k: v.clone() for k, v in mha.state_dict().items()}
    module = fn(mha)
    if not isinstance(module, torch.nn.Module) or type(module).__name__ != "MultiHeadSelfAttention":
        raise TypeError(f"{fn.__name__} returned {describe(module)}; expected a MultiHeadSelfAttention")
    changed = [k for k, v in mha.state_dict().items() if not torch.equal(v, before[k])]
    if changed:
        raise ValueError(f"{fn.__name__} changed the given module's {', '.join(changed)} in place; "
                         "copy the weights instead of modifying them")
    return _forward_backward(module, inputs, grad_output)


HARNESSES = {f.__name__: f for f in (run_module, run_converter)}


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
