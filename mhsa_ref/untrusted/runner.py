"""Runs a learner's extracted code inside the sandbox and streams what each call did.

Everything here runs after isolation, in the same process as untrusted code, so nothing here is
trusted by the judge: the runner only reports arrays and exception names, and the judge decides.
"""

from __future__ import annotations

import ast
import builtins
import re
import sys
import warnings
from typing import Any, BinaryIO

from . import protocol
from .calls import call, error_message
from .harness import Harness
from .outcome import OUT_OF_MEMORY, Outcome


def run(plan: dict, blobs: list[bytes], out: BinaryIO) -> None:
    nonce = plan["nonce"]
    # Bound before any learner code runs, so patching the modules later changes nothing here.
    write_frame, decode, encode_outcome = protocol.write_frame, protocol.decode, protocol.encode_outcome

    def send(header: dict, data: list[bytes] = ()) -> None:
        write_frame(out, dict(header, nonce=nonce), data)

    namespace: dict[str, Any] = {"__name__": "__submission__", "__builtins__": builtins}
    send({"type": "loaded", "problems": _load(plan["code"], plan["filename"], namespace)})
    for index in range(plan["start"], len(plan["exercises"])):
        spec = plan["exercises"][index]
        send({"type": "start", "exercise": index})
        fn = namespace.get(spec["name"])
        if fn is None:
            send({"type": "done", "exercise": index, "missing": True})
            continue
        hits: set[str] = set()
        restore = _tripwires(spec["forbidden"], hits, plan["code"])
        harness = Harness(**spec["harness"]) if spec["harness"] else None
        for c, encoded in enumerate(spec["cases"]):
            args = decode(encoded, blobs)  # a fresh copy for every call
            # BaseException: SystemExit and KeyboardInterrupt from the learner are errors here.
            outcome = call(fn, args, spec["n_outputs"], harness, catch=BaseException)
            try:
                header, data = encode_outcome(outcome, args)
            except MemoryError:
                header, data = encode_outcome(Outcome(OUT_OF_MEMORY, error="MemoryError: while sending the "
                                                                             "outputs back"), args)
            send(dict(header, type="case", exercise=index, case=c), data)
        restore()
        send({"type": "done", "exercise": index, "forbidden_calls": sorted(hits)})
    send({"type": "finished"})


def _load(code: str, filename: str, namespace: dict) -> list[str]:
    """Execute the extracted statements one by one; one failing statement does not stop the rest."""
    problems = []
    for node in ast.parse(code, filename).body:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                exec(compile(ast.Module([node], []), filename, "exec"), namespace)
        except BaseException as exc:  # SystemExit and KeyboardInterrupt included: keep loading
            problems.append(f"line {node.lineno}: {error_message(exc)[:2000]}")
    return problems


def _tripwires(names: list[str], hits: set[str], code: str):
    """Wrap each forbidden callable so that calling it, under any name, is recorded.

    A forbidden function is found by its dotted name and then replaced wherever the same object
    is reachable from a loaded module of that package (a function of ``torch.nn.functional`` is
    often also an attribute of ``torch`` or ``torch._C._nn``). The package is imported first when
    the submission's code
    can import it, so a later ``import`` inside the function gets the wrapped module too.
    """
    undo = []
    for dotted in names:
        parts = dotted.split(".")
        if len(parts) < 2 or not re.search(rf"\b{re.escape(parts[0])}\b", code):
            continue  # a package the code never names cannot be called
        try:
            __import__(parts[0])
        except BaseException:
            continue
        owner = sys.modules.get(parts[0])
        for part in parts[1:-1]:
            owner = getattr(owner, part, None)
        original = getattr(owner, parts[-1], None)
        if not callable(original):
            continue

        def tripwire(*a, __name=dotted, __fn=original, **k):
            hits.add(__name)
            return __fn(*a, **k)

        for module_name, module in list(sys.modules.items()):
            if module_name.split(".")[0] != parts[0] or module is None:
                continue
            for attr, value in list(getattr(module, "__dict__", {}).items()):
                if value is original:
                    try:
                        setattr(module, attr, tripwire)
                        undo.append((module, attr, original))
                    except (AttributeError, TypeError):
                        pass

    def restore() -> None:
        for owner, attr, original in undo:
            try:
                setattr(owner, attr, original)
            except (AttributeError, TypeError):
                pass

    return restore
