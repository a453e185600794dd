"""Long sequences: what attention holds in memory as L grows, side by side in one run.

NumPy part (chapter 07, ``numpy_part``): the peak bytes that NumPy allocates during one call
(``tracemalloc``, which sees NumPy's array buffers) of

    plain     chapter 01's scaled_dot_product_attention (mhsa_ref/chapters/ch01/reference.py):
              the (L, L) scores and weights
    chunked   chapter 07's chunked_attention, chunks of 256 (approximate: local attention only)
    online    chapter 07's online_softmax_attention, key blocks of 256 (exact)

for one head of width 64 in float64, L = 512 ... 8192 (or --max-L), and the ratio plain / online.
Target: at L = 8192, online softmax with blocks of 256 peaks at least 20x lower than plain
attention. Plain attention at L = 8192 needs about 2.5 GiB; lower --max-L on a small machine.

PyTorch part (chapter 08, ``torch_part`` in benchmarks/long_context_torch.py): saved-for-backward
bytes and forward + backward time of plain attention, recomputed attention and SDPA, on the CPU
and on the GPU when there is one.

    python benchmarks/long_context.py [--max-L 8192] [--block 256] [--max-len 4096] [--repeats 3]
"""

from __future__ import annotations

import argparse
import tracemalloc
from typing import Callable

import numpy as np

from mhsa_ref.chapters.ch01.reference import scaled_dot_product_attention
from mhsa_ref.chapters.ch07.reference import chunked_attention, online_softmax_attention


def peak_bytes(fn: Callable[[], object]) -> int:
    """Peak bytes traced while ``fn()`` runs (its inputs, made before, are not counted)."""
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def numpy_part(max_L: int = 8192, block: int = 256, d_h: int = 64, seed: int = 0) -> dict[int, dict[str, int]]:
    """Peak bytes of plain, chunked and online-softmax attention for L = 512, 1024, ... max_L;
    prints the table and returns {L: {method: bytes}}."""
    rng = np.random.default_rng(seed)
    methods = {
        "plain": lambda Q, K, V: scaled_dot_product_attention(Q, K, V),
        "chunked": lambda Q, K, V: chunked_attention(Q, K, V, block),
        "online": lambda Q, K, V: online_softmax_attention(Q, K, V, block),
    }
    lengths = [L for L in (512, 1024, 2048, 4096, 8192, 16384) if L <= max_L]
    print(f"NumPy, float64, one head of width {d_h}; chunk and block {block}: peak MiB during one call")
    print(f"{'L':>6} {'plain':>10} {'chunked':>10} {'online':>10} {'plain/online':>13} {'plain/chunked':>14}")
    results = {}
    for L in lengths:
        Q, K, V = (rng.standard_normal((L, d_h)) for _ in range(3))
        results[L] = {name: peak_bytes(lambda fn=fn: fn(Q, K, V)) for name, fn in methods.items()}
        r = results[L]
        print(f"{L:6d} {r['plain'] / 2**20:10.1f} {r['chunked'] / 2**20:10.1f} {r['online'] / 2**20:10.1f} "
              f"{r['plain'] / r['online']:12.1f}x {r['plain'] / r['chunked']:13.1f}x")
    if 8192 in results:
        ratio = results[8192]["plain"] / results[8192]["online"]
        print(f"target: online peaks >= 20x lower than plain at L = 8192: {ratio:.1f}x, "
              f"{'met' if ratio >= 20 else 'NOT met'}")
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--max-L", type=int, default=8192, help="longest sequence for the NumPy part")
    parser.add_argument("--block", type=int, default=256, help="chunk and block size for the NumPy part")
    parser.add_argument("--max-len", type=int, default=4096, help="longest L on the CPU for the PyTorch part")
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats for the PyTorch part")
    args = parser.parse_args(argv)
    numpy_part(args.max_L, args.block)
    print()
    try:  # the PyTorch half is optional: a NumPy-only install still gets the NumPy figures
        from long_context_torch import torch_part
    except ImportError as exc:
        print(f"PyTorch part skipped: {exc}")
        return
    torch_part(tuple(n for n in (1024, 2048, 4096, 8192) if n <= args.max_len), 4, args.repeats)


if __name__ == "__main__":
    main()
