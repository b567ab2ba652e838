"""(6) The core at real sizes, sharded ÷ unsharded, in this process.

* MLP: ``tpmath.mlp.sharded_mlp`` (column→row, tp ranks, forward + backward) ÷
  ``tpmath.mlp.reference_mlp`` (one device), d_model 4096, d_ff 16384, batch 64, tp 8.
* Vocab-parallel cross-entropy: ``tpmath.vocab_ce.sharded_ce`` (forward + backward, every
  rank's shard) ÷ ``tpmath.vocab_ce.reference_ce`` (unsharded log-softmax CE), V = 50257
  padded per Megatron to a multiple of 128·tp (51200 at tp 8), 512 positions.

Runs are interleaved (subject, baseline, subject, …) after one warm-up of each, so drift on a
shared machine hits both alike.  Peak memory is measured in a separate, untimed call with
tracemalloc (numpy reports its array allocations to it; BLAS scratch buffers are not counted):
the peak of new allocations above the inputs.
"""

from __future__ import annotations

import gc
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))

from tpmath import mlp, vocab_ce  # noqa: E402

from stats import ratio_block  # noqa: E402

MLP_SIZES = {"batch": 64, "d_model": 4096, "d_ff": 16384, "tp": 8}
CE_SIZES = {"vocab": 50257, "positions": 512, "tp": 8, "multiple": 128}


def _timed(fn) -> float:
    gc.collect()
    t0 = time.perf_counter()
    out = fn()
    dt = time.perf_counter() - t0
    del out
    return dt


def _peak_bytes(fn) -> int:
    """Peak bytes allocated (tracemalloc) while fn runs, above what existed before."""
    gc.collect()
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    out = fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    del out
    return peak - base


def _interleaved(subject, baseline, reps: int) -> tuple[list[float], list[float]]:
    subject(), baseline()                      # warm-up: page faults, BLAS thread start
    s, b = [], []
    for i in range(reps):
        order = (subject, baseline) if i % 2 == 0 else (baseline, subject)
        for fn in order:
            (s if fn is subject else b).append(_timed(fn))
    return s, b


def _max_abs(a, b) -> float:
    return float(np.max(np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64))))


def bench_mlp(reps: int, dtype: str = "float64", sizes: dict = MLP_SIZES) -> dict:
    rng = np.random.default_rng(0)
    B, D, F, tp = sizes["batch"], sizes["d_model"], sizes["d_ff"], sizes["tp"]
    dt = np.dtype(dtype)
    X = rng.standard_normal((B, D)).astype(dt)
    W1 = (rng.standard_normal((D, F)) / np.sqrt(D)).astype(dt)
    W2 = (rng.standard_normal((F, D)) / np.sqrt(F)).astype(dt)
    G = rng.standard_normal((B, D)).astype(dt)

    def subject():
        return mlp.sharded_mlp(X, W1, W2, G, tp)

    def baseline():
        return mlp.reference_mlp(X, W1, W2, G)

    # Sanity (not a test): the sharded result is the reference up to rounding.
    ranks, sh = subject()
    ref = baseline()
    err = {k: _max_abs(getattr(sh, k), getattr(ref, k)) for k in ("Y", "G_X", "G_W1", "G_W2")}
    del ranks, sh, ref
    s, b = _interleaved(subject, baseline, reps)
    block = ratio_block(s, b, target=1.25)
    block.update({"sizes": {**sizes, "dtype": dtype}, "max_abs_err": err,
                  "peak_bytes": {"subject": _peak_bytes(subject), "baseline": _peak_bytes(baseline)},
                  "input_bytes": int(X.nbytes + W1.nbytes + W2.nbytes + G.nbytes)})
    block["peak_bytes"]["ratio"] = round(block["peak_bytes"]["subject"] / block["peak_bytes"]["baseline"], 3)
    return block


def bench_vocab_ce(reps: int, dtype: str = "float64", sizes: dict = CE_SIZES) -> dict:
    rng = np.random.default_rng(1)
    V, N, tp, mult = sizes["vocab"], sizes["positions"], sizes["tp"], sizes["multiple"]
    dt = np.dtype(dtype)
    Z = (rng.standard_normal((N, V)) * 3).astype(dt)
    y = rng.integers(0, V, size=N)
    counted = np.ones(N, dtype=bool)
    Vp, ranges = vocab_ce.vocab_ranges(V, tp, mult)

    def subject():
        return vocab_ce.sharded_ce(Z, y, counted, 0.0, ranges, V)

    def baseline():
        return vocab_ce.reference_ce(Z, y, counted, 0.0)

    sh, ref = subject(), baseline()
    err = {"loss": abs(float(sh["loss"]) - float(ref["loss"])), "grad": _max_abs(sh["grad"], ref["grad"])}
    del sh, ref
    s, b = _interleaved(subject, baseline, reps)
    block = ratio_block(s, b, target=1.25)
    block.update({"sizes": {**sizes, "padded_vocab": Vp, "dtype": dtype}, "max_abs_err": err,
                  "peak_bytes": {"subject": _peak_bytes(subject), "baseline": _peak_bytes(baseline)},
                  "input_bytes": int(Z.nbytes)})
    block["peak_bytes"]["ratio"] = round(block["peak_bytes"]["subject"] / block["peak_bytes"]["baseline"], 3)
    return block


# --smoke (tests/test_benchmarks.py): the same code at a size that takes milliseconds; the vocab
# stays GPT-2's so Megatron's padding (50257 -> 51200 at tp 8) is still what is checked.
SMOKE_SIZES = ({"batch": 4, "d_model": 64, "d_ff": 256, "tp": 8},
               {"vocab": 50257, "positions": 8, "tp": 8, "multiple": 128})


def run(mode: str = "full", dtype: str = "float64") -> dict:
    """Repetitions per mode of run.py: full 7, --quick 2, --smoke 1 (at SMOKE_SIZES)."""
    reps = {"full": 7, "quick": 2, "smoke": 1}[mode]
    mlp_sizes, ce_sizes = SMOKE_SIZES if mode == "smoke" else (MLP_SIZES, CE_SIZES)
    return {"mlp": bench_mlp(reps, dtype, mlp_sizes), "vocab_ce": bench_vocab_ce(reps, dtype, ce_sizes),
            "reps": reps}


if __name__ == "__main__":
    import json
    print(json.dumps(run("quick" if "--quick" in sys.argv else "full"), indent=1))
