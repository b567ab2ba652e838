"""One collective on real ranks: rank r holds the site's buffer 10^r·[1, 2, …, L]."""

from __future__ import annotations

import math

import numpy as np

from .. import collectives
from ..cmdline import Series
from ..i18n import Text
from ..validate import as_int
from .output import exact_verdict, tolerance, verdict
from .topic import Topic, opts

MAX_RANKS = 8      # 10^r buffers stay exact in float64 sums up to here


def _plan_collective(o: dict) -> dict:
    n = as_int("ranks", o["ranks"], 1, MAX_RANKS)
    inputs = collectives.example_inputs(n)                  # n × (L,)
    res = collectives.run_collective(o["name"], inputs, op=o["op"], root=o["root"])
    return {"world": n, "name": res.name, "op": res.op, "root": res.root, "dtype": "float64",
            "inputs": inputs, "core": res}


# torch.distributed's name of each reduction op (ReduceOp.<name>)
TORCH_OPS = {"sum": "SUM", "avg": "AVG", "max": "MAX", "min": "MIN", "prod": "PRODUCT"}


def collective_call(name: str, op: str, root: int) -> str:
    """``all_reduce(op=SUM)``, ``broadcast(src=1)`` …: the call a rank makes."""
    spec = collectives.REGISTRY[name]
    args = ([f"op={TORCH_OPS[op]}"] if spec.reduces else []) + ([f"{spec.root}={root}"] if spec.root else [])
    return f"{spec.torch_call}({', '.join(args)})"


def reference_collective(name: str, inputs: list[np.ndarray], op: str, root: int) -> list[np.ndarray | None]:
    """What each rank must hold, from the stacked inputs (the registry's one formula per collective,
    written independently of :mod:`tpmath.collectives`'s per-rank loops)."""
    S = np.stack(inputs)                               # (n, L)
    red = {"sum": S.sum(0), "avg": S.sum(0) / len(S), "max": S.max(0), "min": S.min(0),
           "prod": np.prod(S, axis=0)}[op]             # (L,)
    return collectives.REGISTRY[name].reference(S, red, root)


def collective_check(outputs: list, reference: list) -> float:
    """Largest |output − reference| over every rank (a missing output must be missing)."""
    worst = 0.0
    for got, ref in zip(outputs, reference):
        if (got is None) != (ref is None):
            return math.inf
        if got is not None:
            got, ref = np.asarray(got, dtype=np.float64), np.asarray(ref, dtype=np.float64)
            if got.shape != ref.shape:
                return math.inf
            diff = float(np.max(np.abs(got - ref))) if got.size else 0.0
            if not math.isfinite(diff):         # NaN or inf anywhere is a failure, never "0"
                return math.inf
            worst = max(worst, diff)
    return worst


def collective_verdict(err: float, name: str, op: str, inputs: list) -> str:
    """Sums, maxima, minima and data movement of the site's buffers (integers times powers of
    ten, at most 8 ranks) are exact in float64 in any order: the only right difference is 0.
    A product or an average is rounded, and gloo may round differently: a tolerance."""
    if collectives.REGISTRY[name].reduces and op in ("prod", "avg"):
        return verdict(err, tolerance("float64", np.stack(inputs)))
    return exact_verdict(err)


NOTHING = Text("real.nothing")


def _expected_collective(p: dict) -> tuple[list, list]:
    res = p["core"]
    call = collective_call(p["name"], p["op"], p["root"])
    per_rank = [[(Text("real.input"), x), (Text("real.output", call=call), NOTHING if y is None else y)]
                for x, y in zip(res.inputs, res.outputs)]
    ref = reference_collective(p["name"], res.inputs, p["op"], p["root"])
    err = collective_check(res.outputs, ref)
    return per_rank, [(Text("real.max_diff_outputs"), collective_verdict(err, p["name"], p["op"], res.inputs))]



TOPICS = (Topic("collective", opts(("name", "all-reduce"), ("ranks", "2"), ("op", "sum"), ("root", "0")),
                _plan_collective, _expected_collective, real_module="collectives",
                help_args={"name": {"choices": collectives.NAMES}, "op": {"choices": collectives.OPS},
                           "root": {"rooted": Series(collectives.ROOTED)}}),)
