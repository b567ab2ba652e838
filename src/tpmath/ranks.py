"""What every rank of a real run prints, computed by the simulated core.

``torchrun --standalone --nproc-per-node N -m tpmath.real EXAMPLE …`` runs one of the site's
examples on N real processes with ``torch.distributed`` (:mod:`tpmath.real`); each rank
prints its *records*, a list of ``(name, value)`` pairs, formatted by :func:`format_rank`
with the site's number formatting (:mod:`tpmath.views.fmt`).  This module holds everything
about the examples that does not need torch, so the page (in the browser too) and the
tests can use it:

* :data:`EXAMPLES` - the examples and their options, defined once: the command line of
  :mod:`tpmath.real` is built from them, and :func:`command` writes the line the page shows;
* :func:`plan` - options validated (``TPMathError`` naming the option) into the inputs both
  the real run and the simulation use, and the world size the example needs;
* :func:`expected` - what every rank must print, from the numpy core (one entry per rank),
  plus the lines rank 0 prints after comparing with the unsharded reference.

Letters as in the core modules: tp (= n, shards) ranks, r a rank; B D F (MLP); B D O (linear,
Megatron's Y = X A with A (D, O)); V K N (vocabulary, ids per rank, positions).
Record names: ``W1[:, 0:2]`` is rank r's slice of a tensor; ``Y ← all_reduce(SUM)`` is what
every rank holds after that collective.  Values are arrays, numbers or short texts.
"""

from __future__ import annotations

import json
import math
import shlex
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import attention, collectives, layer, mismatch, mlp, row_linear, sp_layer, vocab_ce
from .errors import TPMathError
from .validate import as_array, as_choice, as_dtype, as_flag, as_float, as_int, parse_json
from .views import fmt

LAUNCH = "torchrun --standalone --nproc-per-node"
MODULE = "tpmath.real"
OK = "\u2713"       # ✓
BAD = "\u2717"      # ✗
MAX_RANKS = 8      # collective example: 10^r buffers stay exact in float64 sums up to here


@dataclass(frozen=True)
class Opt:
    """One option of an example: ``--name VALUE`` (``None`` default = not given)."""

    name: str
    default: str | None
    help: str
    flag: bool = False          # a bare ``--name`` (true when given), no value

    @property
    def dest(self) -> str:
        return self.name.replace("-", "_")


def _opts(*specs: tuple[str, str | None, str]) -> tuple[Opt, ...]:
    return tuple(Opt(*s) for s in specs)


LINEAR_STAGES = ("all", "forward", "backward")
_JSON = "as JSON"
_DTYPE_HELP = ("float64 | float32 | float16 (float16: PyTorch's CPU kernels accumulate in float32, the "
               "simulation rounds every float16 operation, so the last printed digits can differ)")


def _linear_opts(split: str, bias: str) -> tuple[Opt, ...]:
    """Options of the two linear examples (they differ in the split dimension)."""
    return _opts(
        ("tp", "2", f"tensor-parallel size = number of processes; must divide {split}"),
        ("stage", "all", f"which tensors to print: {', '.join(LINEAR_STAGES)}"),
        ("seed", "0", "the page's example inputs: standard normal draws rounded to one decimal"),
        ("batch", "2", "example inputs: batch"),
        ("d-in", "4", "example inputs: input features D"),
        ("d-out", "4", "example inputs: output features O"),
        ("x", None, f"X (batch × d_in) {_JSON}; overrides the example"),
        ("a", None, f"A (d_in × d_out) {_JSON}; overrides the example"),
        ("dy", None, f"upstream gradient dY (batch × d_out) {_JSON}; overrides the example"),
        ("bias", None, f"bias b (d_out) {_JSON}; {bias}"),
    )


MLP_STAGES = ("all", "shards", "forward", "partial", "backward", "grad-w", "grad-x", "grads")

EXAMPLES: dict[str, tuple[str, tuple[Opt, ...]]] = {
    "mlp": ("column→row MLP (tanh, L = Σ Y⊙G): forward and backward, one process per rank", _opts(
        ("tp", "2", "tensor-parallel size = number of processes; must divide d_ff"),
        ("stage", "all", f"which tensors to print: {', '.join(MLP_STAGES)} (the page's stages; grads = every gradient)"),
        ("dtype", "float64", _DTYPE_HELP),
        ("x", None, f"X (batch × d_model) {_JSON}; default the seed's [[1,2],[3,-1]]"),
        ("w1", None, f"W1 (d_model × d_ff) {_JSON}"),
        ("w2", None, f"W2 (d_ff × d_model) {_JSON}"),
        ("g", None, f"upstream gradient G = dL/dY (batch × d_model) {_JSON}"),
        ("seed", None, "random inputs from this seed (with --batch --d-model --d-ff)"),
        ("batch", None, "random inputs: batch (default 4)"),
        ("d-model", None, "random inputs: d_model (default 4)"),
        ("d-ff", None, "random inputs: d_ff (default 24)"),
    )),
    "row-linear": ("row-parallel linear Y = X A (A split by rows, X by columns, AllReduce of Y)",
                   _linear_opts("d_in", "added once, after the AllReduce")),
    "column-linear": ("column-parallel linear Y = X A (A split by columns, AllGather of Y)",
                      _linear_opts("d_out", "each rank adds its slice")),
    "collective": ("one collective on the site's buffers: rank r holds 10^r·[1, 2, …]", _opts(
        ("name", "all-reduce", f"one of {', '.join(collectives.NAMES)}"),
        ("ranks", "2", "number of processes"),
        ("op", "sum", f"reduction: {', '.join(collectives.OPS)}"),
        ("root", "0", "root rank of reduce, broadcast, gather, scatter"),
    )),
    "vocab-ce": ("vocab-parallel cross-entropy (Megatron's algorithm), one process per vocabulary shard", _opts(
        ("shards", "2", "vocabulary shards = number of processes (pads V when it does not divide)"),
        ("target", None, "target token id, or a JSON list for 2-D logits (default the seed's 2)"),
        ("shift", "0", "constant added to every logit (|shift| ≤ 1e4)"),
        ("label-smoothing", "0", "ε in [0, 1], as F.cross_entropy(label_smoothing=ε)"),
        ("ignore-index", "-100", "target value whose positions are ignored"),
        ("dtype", "float64", _DTYPE_HELP),
        ("logits", None, f"logits (V,) or (positions, V) {_JSON}; default the seed's six"),
    )),
    "attention": ("multi-head attention with GQA split by heads (f before QKV, g after W_o), forward and backward",
                  _opts(
        ("tp", "2", "tensor-parallel size = number of processes; must divide --heads"),
        ("heads", "4", "query heads H"),
        ("kv-heads", None, "KV heads K (default H); K ≥ tp: tp divides K; K < tp: K divides tp (replicated)"),
        ("seq", "4", "sequence length S"),
        ("batch", "1", "batch B"),
        ("hidden", "8", "hidden size D (head size D/H)"),
        ("seed", "0", "seed of the page's inputs (tpmath.attention.example_inputs)"),
        ("causal", None, "causal mask", True),
        ("mistake", "none", f"one of {', '.join(attention.MISTAKES)}"),
        ("stage", "all", f"which tensors to print: {', '.join(LINEAR_STAGES)}"),
    )),
    "layer": ("pre-LN transformer layer (LN, attention, residual, LN, GeLU MLP, residual): f and g twice, "
              "replicated LayerNorm weights and row-parallel biases", _opts(
        ("tp", "2", "tensor-parallel size = number of processes; must divide --heads and --ffn"),
        ("heads", "4", "query heads H"),
        ("kv-heads", None, "KV heads K (default H); K ≥ tp: tp divides K; K < tp: K divides tp (replicated)"),
        ("seq", "4", "sequence length S"),
        ("batch", "1", "batch B"),
        ("hidden", "8", "hidden size D (head size D/H)"),
        ("ffn", None, "MLP width F (default 4·D)"),
        ("seed", "0", "seed of the page's inputs (tpmath.layer.example_inputs)"),
        ("causal", None, "causal mask", True),
        ("stage", "all", f"which tensors to print: {', '.join(LINEAR_STAGES)}"),
    )),
    "mismatch": ("a mismatched collective: the checker's verdict, then the real run (with a timeout)", _opts(
        ("scenario", "order_swapped", f"one of {', '.join(mismatch.SCENARIOS)}"),
        ("timeout", "10", "seconds a collective may wait before the backend gives up (1–600)"),
    )),
    "sp-layer": ("Y = X + tanh(LN(X) W1) W2 with tensor + sequence parallelism (AllGather / ReduceScatter "
                 "along the sequence), one process per rank", _opts(
        ("tp", "2", "tensor-parallel size = number of processes; must divide seq and ffn"),
        ("stage", "all", f"which tensors to print: {', '.join(LINEAR_STAGES)}"),
        ("seq", "4", "sequence length S"),
        ("batch", "2", "batch B"),
        ("hidden", "4", "hidden size D"),
        ("ffn", "8", "MLP width F"),
        ("seed", "0", "inputs from numpy.random.default_rng(seed)"),
        ("mistake", "none", f"one of {', '.join(sp_layer.MISTAKES)}"),
        ("dropout", None, f"dropout probability p (default 0; {sp_layer.DEMO_DROPOUT} with "
                          "--mistake same-dropout-seed)"),
    )),
}


def options(example: str) -> tuple[Opt, ...]:
    """The options of ``example`` (unknown names raise)."""
    return EXAMPLES[_example(example)][1]


def _example(name: Any) -> str:
    return as_choice("example", name, tuple(EXAMPLES))


def _filled(example: str, given: dict) -> dict:
    """Options with defaults filled in; an unknown option name is an error."""
    opts = {o.dest: o.default for o in options(example)}
    for key, value in given.items():
        key = key.replace("-", "_")
        if key not in opts:
            raise TPMathError(f"{example}: unknown option --{key.replace('_', '-')}",
                              f"{example}：未知选项 --{key.replace('_', '-')}", field=key)
        if value is not None:
            opts[key] = value
    return opts


# ---------------------------------------------------------------------------------- plans

def plan(example: str, given: dict | None = None) -> dict:
    """Validate the options of ``example`` into what a run needs.

    Returns ``{"example", "world", "options", …}`` plus the example's inputs and the core's
    result (``"core"``), so the real run uses exactly the numbers the simulation used.
    """
    example = _example(example)
    opts = _filled(example, given or {})
    out = _PLANS[example](opts)
    out.update(example=example, options=opts)
    return out


def _plan_mlp(o: dict) -> dict:
    stage = as_choice("stage", o["stage"], MLP_STAGES)
    inputs = mlp.command_line_inputs(o["x"], o["w1"], o["w2"], o["g"], seed=o["seed"], batch=o["batch"],
                                     d_model=o["d_model"], d_ff=o["d_ff"])
    if all(v is None for v in inputs.values()):      # the page's inputs: computed once per (tp, dtype)
        d_ff = mlp.default_inputs()["W1"].shape[1]
        res = mlp.default_run(mlp.validate_tp(o["tp"], d_ff), as_dtype("dtype", o["dtype"]).name)
    else:
        res = mlp.run_mlp(**inputs, tp=o["tp"], dtype=o["dtype"])
    return {"world": res["tp"], "stage": stage, "dtype": res["dtype"], "inputs": res["inputs"], "core": res}


def _plan_linear(o: dict, kind: str) -> dict:
    stage = as_choice("stage", o["stage"], LINEAR_STAGES)
    ex = row_linear.example_inputs(o["seed"], o["batch"], o["d_in"], o["d_out"])
    X = ex["X"] if o["x"] is None else o["x"]
    A = ex["A"] if o["a"] is None else o["a"]
    dY = ex["dY"] if o["dy"] is None and o["x"] is None and o["a"] is None else o["dy"]
    if kind == "row":
        res = row_linear.run_row_linear(X, A, dY, tp=o["tp"], bias=o["bias"])
    else:
        res = row_linear.run_column_linear(X, A, dY, tp=o["tp"], bias=o["bias"], gather_output=True)
    return {"world": res["tp"], "stage": stage, "dtype": "float64", "inputs": res["inputs"], "core": res}


def _plan_collective(o: dict) -> dict:
    n = as_int("ranks", o["ranks"], 1, MAX_RANKS)
    inputs = collectives.example_inputs(n)                  # n × (L,)
    res = collectives.run_collective(o["name"], inputs, op=o["op"], root=o["root"])
    return {"world": n, "name": res["name"], "op": res["op"], "root": res["root"], "dtype": "float64",
            "inputs": inputs, "core": res}


def _plan_vocab(o: dict) -> dict:
    logits = None if o["logits"] is None else as_array("logits", o["logits"], ndim=(1, 2))
    target = o["target"]
    if isinstance(target, str) and target.strip().startswith("["):
        target = parse_json("target", target)
    if logits is None and not isinstance(target, (list, tuple)) and as_int("ignore_index", o["ignore_index"]) == -100:
        # the page's logits: the same memoised run as the section's tables
        res = vocab_ce.default_run(as_int("target", vocab_ce.DEFAULT_TARGET if target is None else target),
                                   as_int("shards", o["shards"]), as_float("shift", o["shift"]),
                                   as_float("label_smoothing", o["label_smoothing"]),
                                   as_dtype("dtype", o["dtype"]).name)
    else:
        res = vocab_ce.run_vocab_ce(logits, target, shards=o["shards"], shift=o["shift"],
                                    label_smoothing=o["label_smoothing"], ignore_index=o["ignore_index"],
                                    dtype=o["dtype"])
    L = as_array("logits", vocab_ce.DEFAULT_LOGITS, ndim=1) if logits is None else logits
    return {"world": res["shards"], "dtype": res["dtype"], "logits": L, "core": res}


REAL_MISMATCH_CALLS = ("all-reduce", "all-gather", "broadcast", "barrier")


def _plan_mismatch(o: dict) -> dict:
    scenario = as_choice("scenario", o["scenario"], tuple(mismatch.SCENARIOS))
    timeout = as_float("timeout", o["timeout"], 1.0, 600.0)
    calls = mismatch.validate_calls(mismatch.SCENARIOS[scenario])
    for r, seq in enumerate(calls):
        for i, c in enumerate(seq):
            if c["name"] not in REAL_MISMATCH_CALLS:
                raise TPMathError(f"calls[{r}][{i}]: {c['name']} is not run on real ranks; "
                                  f"supported: {', '.join(REAL_MISMATCH_CALLS)}",
                                  f"calls[{r}][{i}]：真实进程不运行 {c['name']}；支持：{', '.join(REAL_MISMATCH_CALLS)}",
                                  field="scenario")
    return {"world": len(calls), "scenario": scenario, "timeout": timeout, "calls": calls,
            "core": mismatch.check_calls(calls)}


def _plan_sp_layer(o: dict) -> dict:
    stage = as_choice("stage", o["stage"], LINEAR_STAGES)
    res = sp_layer.run_sp_layer(o["tp"], o["seq"], o["batch"], o["hidden"], o["ffn"], o["seed"], o["mistake"],
                                o["dropout"])
    return {"world": res["tp"], "stage": stage, "dtype": "float64", "core": res}
def _plan_attention(o: dict) -> dict:
    stage = as_choice("stage", o["stage"], LINEAR_STAGES)
    args = {k: o[k] for k in ("tp", "heads", "kv_heads", "seq", "batch", "hidden", "causal", "mistake")}
    cfg = attention.validate_config(**args)
    res = attention.cached_run(**args, seed=o["seed"])
    return {"world": cfg.tp, "stage": stage, "dtype": "float64", "cfg": cfg, "inputs": res["inputs"], "core": res}


def _plan_layer(o: dict) -> dict:
    stage = as_choice("stage", o["stage"], LINEAR_STAGES)
    args = {k: o[k] for k in ("tp", "heads", "kv_heads", "seq", "batch", "hidden", "ffn", "causal")}
    cfg, F = layer.validate_layer(**args)
    res = layer.cached_run(**args, seed=o["seed"])
    return {"world": cfg.tp, "stage": stage, "dtype": "float64", "cfg": cfg, "ffn": F, "inputs": res["inputs"],
            "core": res}


_PLANS = {
    "mlp": _plan_mlp,
    "row-linear": lambda o: _plan_linear(o, "row"),
    "column-linear": lambda o: _plan_linear(o, "column"),
    "collective": _plan_collective,
    "vocab-ce": _plan_vocab,
    "mismatch": _plan_mismatch,
    "sp-layer": _plan_sp_layer,
    "attention": _plan_attention,
    "layer": _plan_layer,
}


# ------------------------------------------------------------------------- tolerances

# Allowed |TP − unsharded| relative to the largest reference value, per dtype, for examples
# without a derived bound (the MLP uses mlp.tolerances).  Sharding only reorders additions;
# these are generous multiples of eps for the small sizes of the examples.
REL_TOL = {"float64": 1e-12, "float32": 1e-5, "float16": 1e-2}


def tolerance(dtype: str, reference: Any) -> float:
    """The tolerance for comparing with ``reference`` in ``dtype``."""
    ref = np.asarray(reference, dtype=np.float64)
    finite = ref[np.isfinite(ref)]
    scale = float(np.max(np.abs(finite))) if finite.size else 0.0
    return REL_TOL[dtype] * max(1.0, scale)


def verdict(err: float, tol: float) -> str:
    """``< tol ✓`` when the difference passes, else its digits and ``✗ (tolerance …)``."""
    if err < tol:
        return f"{fmt.within(err, tol)} {OK}"
    return f"{fmt.err(err)} {BAD} (tolerance {fmt.within(0.0, tol)[2:]})"


# ---------------------------------------------------------------------------- records

def cols(a: int, b: int) -> str:
    return f"[:, {a}:{b}]"


def rows(a: int, b: int) -> str:
    return f"[{a}:{b}, :]"


MLP_RECORDS = {
    "all": ("W1", "W2", "Z", "H", "Y_partial", "Y", "loss", "G_H", "G_Z", "G_W1", "G_W2", "G_X_partial", "G_X"),
    "shards": ("W1", "W2"),
    "forward": ("W1", "Z", "H"),
    "partial": ("W1", "H", "Y_partial", "Y", "loss"),
    "backward": ("W2", "G_H", "G_Z"),
    "grad-w": ("W1", "G_W1", "G_W2"),
    "grad-x": ("W1", "G_Z", "G_X_partial", "G_X"),
    "grads": ("G_H", "G_Z", "G_W1", "G_W2", "G_X_partial", "G_X"),
}


def mlp_names(r: int, tp: int, d_ff: int) -> dict[str, str]:
    """Printed name of each MLP record on rank r (its slice of F = d_ff written out)."""
    k = d_ff // tp
    a, b = r * k, (r + 1) * k
    return {"W1": "W1" + cols(a, b), "W2": "W2" + rows(a, b), "Z": "Z", "H": "H", "Y_partial": "Y_partial",
            "Y": "Y ← all_reduce(SUM)", "loss": "loss = Σ Y⊙G", "G_H": "G_H", "G_Z": "G_Z",
            "G_W1": "G_W1" + cols(a, b), "G_W2": "G_W2" + rows(a, b), "G_X_partial": "G_X_partial",
            "G_X": "G_X ← all_reduce(SUM)"}


def _expected_mlp(p: dict) -> tuple[list, list]:
    res = p["core"]
    tp, d_ff = res["tp"], res["inputs"]["W1"].shape[1]
    per_rank = []
    for rk in res["ranks"]:
        values = {**rk, "Y": res["sharded"]["Y"], "loss": res["sharded"]["loss"], "G_X": res["sharded"]["G_X"]}
        names = mlp_names(rk["rank"], tp, d_ff)
        per_rank.append([(names[k], values[k]) for k in MLP_RECORDS[p["stage"]]])
    check = [(f"max|Δ| {k}", verdict(res["max_abs_err"][k], res["tolerances"][k]))
             for k in ("loss", "Y", "G_X", "G_W1", "G_W2")]
    return per_rank, check


LINEAR_RECORDS = {
    "row": {"forward": ("X_shard", "A_shard", "Y_partial", "Y"),
            "backward": ("dY", "dX_shard", "dA_shard", "db")},
    "column": {"forward": ("X", "A_shard", "b_shard", "Y_shard", "Y"),
               "backward": ("dY_shard", "dX_partial", "dX", "dA_shard", "db_shard")},
}


def linear_names(kind: str, r: int, k: int, has_bias: bool) -> dict[str, str]:
    """Printed names of the linear layers' records on rank r (k = shard width)."""
    a, b = r * k, (r + 1) * k
    if kind == "row":
        return {"X_shard": "X" + cols(a, b), "A_shard": "A" + rows(a, b), "Y_partial": "Y_partial",
                "Y": "Y ← all_reduce(SUM)" + (" + b" if has_bias else ""), "dY": "dY", "dX_shard": "dX" + cols(a, b),
                "dA_shard": "dA" + rows(a, b), "db": "db"}
    return {"X": "X", "A_shard": "A" + cols(a, b), "b_shard": f"b[{a}:{b}]", "Y_shard": "Y" + cols(a, b),
            "Y": "Y ← all_gather", "dY_shard": "dY" + cols(a, b), "dX_partial": "dX_partial",
            "dX": "dX ← all_reduce(SUM)", "dA_shard": "dA" + cols(a, b), "db_shard": f"db[{a}:{b}]"}


def linear_stage_keys(kind: str, stage: str, has_bias: bool) -> tuple[str, ...]:
    """Record keys printed for ``stage`` (bias records only when there is a bias)."""
    stages = ("forward", "backward") if stage == "all" else (stage,)
    keys = tuple(k for s in stages for k in LINEAR_RECORDS[kind][s])
    return tuple(k for k in keys if has_bias or k not in ("b_shard", "db", "db_shard"))


def _expected_linear(p: dict) -> tuple[list, list]:
    res = p["core"]
    kind, tp = res["kind"], res["tp"]
    inp = res["inputs"]
    bias = inp["bias"]
    k = (inp["A"].shape[0] if kind == "row" else inp["A"].shape[1]) // tp
    per_rank = []
    for rk in res["ranks"]:
        r = rk["rank"]
        values = dict(rk)
        values.update(Y=res["Y"], dY=inp["dY"], X=inp["X"], dX=res["sharded"]["dX"])
        if bias is not None:
            values.update(db=res["sharded"]["db"], b_shard=bias[r * k:(r + 1) * k],
                          db_shard=res["sharded"]["db"][r * k:(r + 1) * k])
        names = linear_names(kind, r, k, bias is not None)
        per_rank.append([(names[key], values[key]) for key in linear_stage_keys(kind, p["stage"], bias is not None)])
    check = [(f"max|Δ| {key}", verdict(err, tolerance("float64", res["reference"][key])))
             for key, err in res["max_abs_err"].items()]
    return per_rank, check


# torch.distributed call and reduce op each collective of the site maps to
TORCH_CALLS = {"all-reduce": "all_reduce", "reduce": "reduce", "broadcast": "broadcast",
               "all-gather": "all_gather_into_tensor", "reduce-scatter": "reduce_scatter_tensor",
               "all-to-all": "all_to_all_single", "gather": "gather", "scatter": "scatter"}
TORCH_OPS = {"sum": "SUM", "avg": "AVG", "max": "MAX", "min": "MIN", "prod": "PRODUCT"}


def collective_call(name: str, op: str, root: int) -> str:
    """``all_reduce(op=SUM)``, ``broadcast(src=1)`` …: the call a rank makes."""
    args = []
    if name in collectives.USES_OP:
        args.append(f"op={TORCH_OPS[op]}")
    if name in ("reduce", "gather"):
        args.append(f"dst={root}")
    elif name in ("broadcast", "scatter"):
        args.append(f"src={root}")
    return f"{TORCH_CALLS[name]}({', '.join(args)})"


def reference_collective(name: str, inputs: list[np.ndarray], op: str, root: int) -> list[np.ndarray | None]:
    """What each rank must hold, from the stacked inputs (one formula per collective,
    written independently of :mod:`tpmath.collectives`'s per-rank loops)."""
    S = np.stack(inputs)                               # (n, L)
    n, L = S.shape
    red = {"sum": S.sum(0), "avg": S.sum(0) / n, "max": S.max(0), "min": S.min(0),
           "prod": np.prod(S, axis=0)}[op]             # (L,)
    blocks = S.reshape(n, n, L // n) if L % n == 0 else None   # [src, block]
    return {
        "all-reduce": lambda: [red] * n,
        "reduce": lambda: [red if r == root else None for r in range(n)],
        "broadcast": lambda: [S[root]] * n,
        "all-gather": lambda: [S.reshape(-1)] * n,
        "reduce-scatter": lambda: list(red.reshape(n, L // n)),
        "all-to-all": lambda: [blocks[:, r].reshape(-1) for r in range(n)],
        "gather": lambda: [S.reshape(-1) if r == root else None for r in range(n)],
        "scatter": lambda: list(S[root].reshape(n, L // n)),
    }[name]()


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
    if name in collectives.USES_OP and op in ("prod", "avg"):
        return verdict(err, tolerance("float64", np.stack(inputs)))
    return exact_verdict(err)


NOTHING = "— (this rank receives nothing)"


def _expected_collective(p: dict) -> tuple[list, list]:
    res = p["core"]
    call = collective_call(p["name"], p["op"], p["root"])
    per_rank = [[("input", x), (f"output ← {call}", NOTHING if y is None else y)]
                for x, y in zip(res["inputs"], res["outputs"])]
    ref = reference_collective(p["name"], res["inputs"], p["op"], p["root"])
    err = collective_check(res["outputs"], ref)
    return per_rank, [("max|Δ| outputs", collective_verdict(err, p["name"], p["op"], res["inputs"]))]


def exact_verdict(err: float) -> str:
    """``0 ✓`` for an exact result, else the difference and ✗."""
    return f"0 {OK}" if err == 0 else f"{fmt.err(err)} {BAD} (expected exactly 0)"


def vocab_names(a: int, b: int) -> dict[str, str]:
    """Printed names of the vocab-parallel CE records of the rank owning ids [a, b)."""
    return {"ids": "vocab ids", "logits": f"z[{a}:{b}]", "local_max": "local max",
            "m": "m ← all_reduce(MAX)", "target_shifted": "z_t − m (0 unless t is here)",
            "t": "z_t − m ← all_reduce(SUM)", "local_sum_exp": "local Σ exp(z − m)",
            "s": "Σ exp ← all_reduce(SUM)", "local_sum_shifted": "local Σ (z − m)",
            "sum_shifted": "Σ (z − m) ← all_reduce(SUM)", "loss": "loss",
            "prob": f"softmax[{a}:{b}]", "grad": f"dL/dz[{a}:{b}]"}


def vocab_ids(a: int, b: int, V: int) -> str:
    """``0–2``, or ``4–5, padding 6–7`` when the shard reaches past V."""
    real = f"{a}–{min(b, V) - 1}" if min(b, V) > a else "none"
    return real if b <= V else f"{real}, padding {max(a, V)}–{b - 1}"


VOCAB_RECORDS = ("ids", "logits", "local_max", "m", "target_shifted", "t", "local_sum_exp", "s",
                 "local_sum_shifted", "sum_shifted", "loss", "prob", "grad")


def _expected_vocab(p: dict) -> tuple[list, list]:
    res = p["core"]
    V, eps = res["vocab"], res["label_smoothing"]
    ranks = res["ranks"]
    common = {"m": res["global_max"], "loss": res["loss"],
              "t": collectives.reduce_all([e["target_shifted"] for e in ranks], "sum"),
              "s": res["global_sum_exp"]}
    if eps:
        common["sum_shifted"] = collectives.reduce_all([e["local_sum_shifted"] for e in ranks], "sum")
    per_rank = []
    for e in ranks:
        a, b = e["vocab_range"]
        values = {**e, **common, "ids": vocab_ids(a, b, V)}
        names = vocab_names(a, b)
        per_rank.append([(names[k], values[k]) for k in VOCAB_RECORDS if k in values])
    return per_rank, vocab_check(res["loss"], res["reference_loss"], res["grad"], res["reference_grad"],
                                 res["dtype"], res["counted"])


def vocab_check(loss: float, ref_loss: float, grad: Any, ref_grad: Any, dtype: str, counted: int) -> list:
    """Rank 0's comparison of the vocab-parallel loss and gradient with the unsharded ones."""
    if counted == 0:
        # PyTorch's mean over zero positions is NaN; we define the loss as 0 (nothing to learn),
        # and the gradient must then be 0 everywhere
        return [("loss", "every position ignored: 0 by definition (PyTorch: NaN)"),
                ("max|dL/dz|", verdict(float(np.max(np.abs(np.asarray(grad, np.float64)), initial=0.0)),
                                        tolerance(dtype, 1.0)))]
    return [("max|Δ| loss", verdict(abs(float(loss) - float(ref_loss)), tolerance(dtype, ref_loss))),
            ("max|Δ| dL/dz", verdict(float(np.max(np.abs(np.asarray(grad, np.float64)
                                                        - np.asarray(ref_grad, np.float64)))),
                                     tolerance(dtype, ref_grad)))]


def call_text(call: dict) -> str:
    """``#0 all_reduce [4] float32 {0,1}``: a call of a mismatch scenario."""
    name = call["name"].replace("-", "_")
    shape = "[" + ",".join(str(s) for s in call["shape"]) + "]"
    group = "{" + ",".join(str(g) for g in call["group"]) + "}"
    return f"{name} {shape} {call['dtype']} {group}"


def _expected_mismatch(p: dict) -> tuple[list, list]:
    res = p["core"]
    hangs = {h["rank"]: h for h in res["hangs"]}
    per_rank = []
    for r, seq in enumerate(p["calls"]):
        recs = []
        for i, c in enumerate(seq):
            h = hangs.get(r)
            if h is None or i < h["call_index"]:
                predicted = "checker: completes"
            elif i == h["call_index"]:
                predicted = f"checker: never completes ({h['code']})"
            else:
                predicted = "checker: never reached"
            recs.append((f"#{i} {call_text(c)}", predicted))
        per_rank.append(recs)
    return per_rank, []


SP_RECORDS = {
    "forward": ("X", "W1", "W2", "A", "A_full", "keep_H", "O", "keep_O", "Y"),
    "backward": ("G_Y", "G_O_full", "G_W2", "G_W1", "G_A", "G_X", "G_gamma_partial", "G_gamma", "G_beta_partial",
                 "G_beta"),
}


def sp_names(rk: dict, mistake: str) -> dict[str, str]:
    """Printed names of rank rk's sequence-parallel records (its token and column ranges written out)."""
    (a, b), (c, d) = rk["seq_range"], rk["ffn_range"]
    tok = f"[:, {a}:{b}, :]"
    wrong = mistake == "gather-wrong-dim"
    reduced = mistake != "ln-grad-not-reduced"
    return {"X": "X" + tok, "W1": "W1" + cols(c, d), "W2": "W2" + rows(c, d), "A": "LN(X)" + tok,
            "A_full": "LN(X) ← all_gather" + (" (hidden dim, viewed as seq)" if wrong else " (seq)"),
            "keep_H": f"dropout keep mask of H[:, :, {c}:{d}]", "O": "O" + tok + " ← reduce_scatter(SUM, seq)",
            "keep_O": "dropout keep mask of O" + tok, "Y": "Y" + tok, "G_Y": "G_Y" + tok,
            "G_O_full": "G_O ← all_gather (seq)", "G_W2": "G_W2" + rows(c, d), "G_W1": "G_W1" + cols(c, d),
            "G_A": "G_LN" + tok + " ← reduce_scatter(SUM" + (", hidden dim)" if wrong else ", seq)"),
            "G_X": "G_X" + tok, "G_gamma_partial": "G_gamma (own tokens)", "G_beta_partial": "G_beta (own tokens)",
            "G_gamma": "G_gamma ← all_reduce(SUM)" if reduced else "G_gamma (never reduced)",
            "G_beta": "G_beta ← all_reduce(SUM)" if reduced else "G_beta (never reduced)"}


def sp_stage_keys(stage: str, mistake: str, dropout: float) -> tuple[str, ...]:
    """Record keys printed for ``stage``: masks only with dropout on, the reduced γ/β only when reduced."""
    stages = ("forward", "backward") if stage == "all" else (stage,)
    skip = set() if dropout else {"keep_H", "keep_O"}
    if mistake == "ln-grad-not-reduced":
        skip |= {"G_gamma", "G_beta"}
    return tuple(k for s in stages for k in SP_RECORDS[s] if k not in skip)


def sp_value(key: str, value: Any) -> Any:
    """What a record prints: (B, ·, ·) tensors as rows (b, s) × columns, masks as 0/1."""
    arr = np.asarray(value, dtype=np.float64)
    return arr.reshape(-1, arr.shape[-1]) if arr.ndim == 3 else arr


SP_CHECK = ("loss", "Y", "G_X", "G_gamma", "G_beta", "G_W1", "G_W2")


def _expected_sp_layer(p: dict) -> tuple[list, list]:
    res = p["core"]
    keys = sp_stage_keys(p["stage"], res["mistake"], res["dropout"])
    per_rank = []
    for rk in res["ranks"]:
        names = sp_names(rk, res["mistake"])
        per_rank.append([(names[k], sp_value(k, rk[k])) for k in keys])
    check = [(f"max|Δ| {k}", verdict(res["max_abs_err"][k], res["tolerances"][k])) for k in SP_CHECK]
    return per_rank, check


def attention_records(cfg: attention.Config, r: int, q_heads: list, kv_heads: list,
                      stage: str) -> list[tuple[str, str]]:
    """(key, printed name) of what rank r prints for ``stage``; keys index a rank's values
    (``P<j>`` = the probabilities of its j-th local head).  Names say which collective made a
    value, and under a mistake what the rank really does."""
    E, tp, m = cfg.head_dim, cfg.tp, cfg.mistake
    a, b = q_heads[0] * E, (q_heads[-1] + 1) * E
    c, d = kv_heads[0] * E, (kv_heads[-1] + 1) * E
    swapped = m == "f-and-g-swapped"
    reduced = " ← all_reduce(SUM)" if tp > 1 else ""
    groups = attention.kv_groups([attention.rank_heads(cfg, q)[1] for q in range(tp)])
    mine = next(g for g in groups if r in g)
    kv_sum = (f" ← all_reduce(SUM, ranks {','.join(map(str, mine))})"
              if cfg.kv_heads < tp and m != "kv-grad-not-summed" else "")
    fwd = [("W_q", "W_q" + cols(a, b)), ("W_k", "W_k" + cols(c, d)), ("W_v", "W_v" + cols(c, d)),
           ("W_o", "W_o" + rows(a, b))]
    if swapped:
        fwd.append(("X_in", "X" + reduced))
    fwd += [("Q", "Q"), ("K", "K"), ("V", "V")]
    fwd += [(f"P{j}", f"P (head {h})") for j, h in enumerate(q_heads)]
    fwd += [("Y_partial", "Y_partial"), ("Y", "Y" + ("" if swapped else reduced)), ("loss", "loss = Σ Y⊙G")]
    bwd = [("G_Y", "G_Y" + reduced)] if swapped else []
    bwd += [("G_W_q", "G_W_q" + cols(a, b)), ("G_W_k", "G_W_k" + cols(c, d) + kv_sum),
            ("G_W_v", "G_W_v" + cols(c, d) + kv_sum), ("G_W_o", "G_W_o" + rows(a, b)),
            ("G_X_partial", "G_X_partial"), ("G_X", "G_X" + ("" if swapped else reduced))]
    return {"forward": fwd, "backward": bwd, "all": fwd + bwd}[stage]


def attention_values(rk: dict) -> dict:
    """A rank's values as printed: tokens as rows (B·S, ·), one (B·S, S) matrix per local head."""
    def rows2(x):
        return np.asarray(x).reshape(-1, np.shape(x)[-1])
    out = {k: (rows2(v) if isinstance(v, np.ndarray) and v.ndim == 3 else v) for k, v in rk.items()}
    for j in range(np.shape(rk["probs"])[1]):
        out[f"P{j}"] = rows2(rk["probs"][:, j])
    return out


ATTENTION_CHECK = ("loss", "Y", "G_X", "G_W_q", "G_W_k", "G_W_v", "G_W_o")


def _expected_attention(p: dict) -> tuple[list, list]:
    res, cfg = p["core"], p["cfg"]
    per_rank = []
    for rk in res["ranks"]:
        values = attention_values(rk)
        recs = attention_records(cfg, rk["rank"], rk["q_heads"], rk["kv_heads"], p["stage"])
        per_rank.append([(name, values[key]) for key, name in recs])
    check = [(f"max|Δ| {k}", verdict(res["max_abs_err"][k], res["tolerances"][k])) for k in ATTENTION_CHECK]
    return per_rank, check


LAYER_GRADS = ("G_gamma1", "G_beta1", "G_b_o", "G_gamma2", "G_beta2", "G_b2")


def layer_records(cfg: attention.Config, rk: dict, stage: str) -> list[tuple[str, str]]:
    """(key, printed name) of what rank ``rk`` of the layer prints for ``stage``: its shards, the
    two g results, and every gradient; the replicated parameters' gradients say that no
    collective made them."""
    E, tp, r = cfg.head_dim, cfg.tp, rk["rank"]
    q, kv = rk["q_heads"], rk["kv_heads"]
    a, b = q[0] * E, (q[-1] + 1) * E
    c, d = kv[0] * E, (kv[-1] + 1) * E
    e, f = rk["ffn_cols"]
    reduced = " ← all_reduce(SUM)" if tp > 1 else ""
    groups = attention.kv_groups([attention.rank_heads(cfg, x)[1] for x in range(tp)])
    mine = next(g for g in groups if r in g)
    kv_sum = f" ← all_reduce(SUM, ranks {','.join(map(str, mine))})" if cfg.kv_heads < tp else ""
    fwd = [("W_q", "W_q" + cols(a, b)), ("W_k", "W_k" + cols(c, d)), ("W_v", "W_v" + cols(c, d)),
           ("W_o", "W_o" + rows(a, b)), ("W1", "W1" + cols(e, f)), ("b1", f"b1[{e}:{f}]"), ("W2", "W2" + rows(e, f)),
           ("Y_attn_partial", "attention partial (own heads)"), ("H1", "U = X + attention" + reduced + " + b_o"),
           ("Y_mlp_partial", "MLP partial (own columns)"), ("Y", "Y = U + MLP" + reduced + " + b2"),
           ("loss", "loss = Σ Y⊙G")]
    bwd = [("G_W_q", "G_W_q" + cols(a, b)), ("G_W_k", "G_W_k" + cols(c, d) + kv_sum),
           ("G_W_v", "G_W_v" + cols(c, d) + kv_sum), ("G_W_o", "G_W_o" + rows(a, b)), ("G_W1", "G_W1" + cols(e, f)),
           ("G_b1", f"G_b1[{e}:{f}]"), ("G_W2", "G_W2" + rows(e, f))]
    bwd += [(k, k + " (local, no collective)") for k in LAYER_GRADS]
    bwd += [("G_X", "G_X" + (" (f: all_reduce(SUM) of G_LN1, G_LN2)" if tp > 1 else ""))]
    return {"forward": fwd, "backward": bwd, "all": fwd + bwd}[stage]


def layer_values(rk: dict) -> dict:
    """A layer rank's values as printed: tokens as rows (B·S, ·)."""
    return {k: (np.asarray(v).reshape(-1, v.shape[-1]) if isinstance(v, np.ndarray) and v.ndim == 3 else v)
            for k, v in rk.items()}


LAYER_CHECK = ("loss", "Y", "G_X") + tuple("G_" + p for p in layer.PARAMS)


def _expected_layer(p: dict) -> tuple[list, list]:
    res, cfg = p["core"], p["cfg"]
    per_rank = []
    for rk in res["ranks"]:
        values = layer_values(rk)
        per_rank.append([(name, values[key]) for key, name in layer_records(cfg, rk, p["stage"])])
    check = [(f"max|Δ| {k}", verdict(res["max_abs_err"][k], res["tolerances"][k])) for k in LAYER_CHECK]
    return per_rank, check


_EXPECTED = {"mlp": _expected_mlp, "row-linear": _expected_linear, "column-linear": _expected_linear,
             "collective": _expected_collective, "vocab-ce": _expected_vocab, "mismatch": _expected_mismatch,
             "sp-layer": _expected_sp_layer, "attention": _expected_attention, "layer": _expected_layer}


def expected(p: dict) -> tuple[list[list[tuple[str, Any]]], list[tuple[str, Any]]]:
    """What each rank of a correct real run prints (one list per rank) and rank 0's check lines."""
    return _EXPECTED[p["example"]](p)


# ---------------------------------------------------------------------------- output

def value_text(value: Any) -> str:
    """A record's value as the site shows it (matrices one row per line)."""
    if isinstance(value, str):
        return value
    arr = np.asarray(value)
    if arr.ndim == 0:
        return fmt.num(arr)
    return fmt.mat(arr)


def format_rank(r: int, records: list[tuple[str, Any]], width: int = 0) -> list[str]:
    """Lines ``[rank r] name  value``; a matrix continues on the next lines under its value.
    Names are padded to the longest one (at least ``width``)."""
    if not records:
        return []
    width = max(width, *(len(name) for name, _ in records))
    out = []
    for name, value in records:
        for i, line in enumerate(value_text(value).split("\n")):
            out.append(f"[rank {r}] {(name if i == 0 else ''):<{width}}  {line}".rstrip())
    return out


CHECK_TITLE = "vs the unsharded reference (one process):"


def format_check(check: list[tuple[str, Any]]) -> list[str]:
    """Rank 0's comparison block."""
    if not check:
        return []
    return [f"[rank 0] {CHECK_TITLE}"] + format_rank(0, [("  " + n, v) for n, v in check])


def format_output(per_rank: list, check: list) -> str:
    """The whole output of a run: every rank's records in rank order, then the check."""
    lines = [line for r, recs in enumerate(per_rank) for line in format_rank(r, recs)]
    return "\n".join(lines + format_check(check))


def records_json(r: int, records: list[tuple[str, Any]], check: list | None = None) -> str:
    """One JSON line per rank (``--json``): full-precision values, ±inf written as strings."""
    def plain(v: Any) -> Any:
        if isinstance(v, str):
            return v
        arr = np.asarray(v, dtype=np.float64)
        out = arr.tolist()
        return _nonfinite_to_str(out)
    obj = {"rank": r, "records": [[n, plain(v)] for n, v in records]}
    if check is not None:
        obj["check"] = [[n, plain(v)] for n, v in check]
    return json.dumps(obj, ensure_ascii=False, allow_nan=False)


def _nonfinite_to_str(x: Any) -> Any:
    if isinstance(x, list):
        return [_nonfinite_to_str(v) for v in x]
    return x if math.isfinite(x) else ("inf" if x > 0 else "-inf" if x < 0 else "nan")


# --------------------------------------------------------------------------- command

def command(example: str, given: dict | None = None) -> str:
    """The line to type: ``torchrun … -m tpmath.real EXAMPLE`` with the non-default options
    (validated first, so the page never shows a command that would fail)."""
    return command_for(plan(example, given))


def command_for(p: dict) -> str:
    """:func:`command` of an existing plan."""
    parts = [*LAUNCH.split(), str(p["world"]), "-m", MODULE, p["example"]]
    for o in options(p["example"]):
        value = p["options"][o.dest]
        if o.flag:
            parts += [f"--{o.name}"] if as_flag(o.name, value) else []
        elif value is not None and _arg(value) != o.default:
            parts += [f"--{o.name}", _arg(value)]
    return " ".join(shlex.quote(s) for s in parts)


def _arg(value: Any) -> str:
    """An option value as typed: numbers plainly, lists as compact JSON."""
    if isinstance(value, (list, tuple, np.ndarray)):
        return json.dumps(np.asarray(value).tolist(), separators=(",", ":"))
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def expected_output(example: str, given: dict | None = None) -> dict:
    """``{"command", "output"}``: the line to run and what its ranks print (the page's block)."""
    p = plan(example, given)
    per_rank, check = expected(p)
    return {"command": command_for(p), "output": format_output(per_rank, check)}
