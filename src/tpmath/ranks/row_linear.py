"""Row- and column-parallel linear layers on real ranks (Megatron's Y = X A, A (D, O))."""

from __future__ import annotations

from .. import row_linear
from ..record import fields_of
from ..validate import as_choice
from .output import cols, rows, tolerance, verdict
from .topic import Opt, Topic, opts

LINEAR_STAGES = ("all", "forward", "backward")


def _linear_opts() -> tuple[Opt, ...]:
    """Options of the two linear examples (their help says which dimension each splits)."""
    return opts(("tp", "2"), ("stage", "all"), ("seed", "0"), ("batch", "2"), ("d-in", "4"), ("d-out", "4"),
                ("x", None), ("a", None), ("dy", None), ("bias", None))


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
    return {"world": res.tp, "stage": stage, "dtype": "float64", "inputs": res.inputs, "core": res}


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
    kind, tp = res.kind, res.tp
    inp = res.inputs
    bias = inp["bias"]
    k = (inp["A"].shape[0] if kind == "row" else inp["A"].shape[1]) // tp
    per_rank = []
    for rk in res.ranks:
        r = rk.rank
        values = fields_of(rk)
        values.update(Y=res.Y, dY=inp["dY"], X=inp["X"], dX=res.sharded.dX)
        if bias is not None:
            values.update(db=res.sharded.db, b_shard=bias[r * k:(r + 1) * k],
                          db_shard=res.sharded.db[r * k:(r + 1) * k])
        names = linear_names(kind, r, k, bias is not None)
        per_rank.append([(names[key], values[key]) for key in linear_stage_keys(kind, p["stage"], bias is not None)])
    check = [(f"max|Δ| {key}", verdict(err, tolerance("float64", getattr(res.reference, key))))
             for key, err in res.max_abs_err.items()]
    return per_rank, check



LINEAR_HELP = {"stage": {"choices": LINEAR_STAGES}}
TOPICS = (Topic("row-linear", _linear_opts(), lambda o: _plan_linear(o, "row"), _expected_linear,
                real_module="row_linear", help_args=LINEAR_HELP),
          Topic("column-linear", _linear_opts(), lambda o: _plan_linear(o, "column"), _expected_linear,
                real_module="row_linear", help_args=LINEAR_HELP),)
