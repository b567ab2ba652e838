"""Views of the backward pass (page 1): gradients per rank, DP×TP coefficients, precision.

Sections
--------
``backward``   every gradient of the column→row MLP on every rank (table
               ``backward-grads``) and the assembled gradients checked against the
               unsharded reference and central finite differences (``grad-check``).
``dp-tp``      dp replicas × tp ranks: the correct reduction (TP sum, DP mean) and
               three wrong ones, with their error and scale (``dp-tp``).
``precision``  sharded vs unsharded per dtype against the derived tolerance
               (``precision``) and one SGD step, sharded vs unsharded (``sgd-step``).

Letters as in :mod:`tpmath.mlp` and :mod:`tpmath.dp_tp` (B, D, F, tp, dp).
"""

from __future__ import annotations

from functools import lru_cache

from .. import dp_tp, mlp, precision
from .. import fmt
from . import Control, Section, parse_controls
from . import tree
from .cells import label, table
from .fig_backward import figure_backward, figure_dp_tp, figure_precision

TP_OPTIONS = (1, 2, 4)
DP_OPTIONS = (1, 2, 4)

# Central differences with h = 1e-6 are accurate to about h² + eps/h ≈ 1e-10: the
# analytic gradient passes when it agrees to 1e-7 (stated in the column header).
FD_TOL = 1e-7

# gradient -> (i18n label key, how the ranks' pieces become the whole gradient)
_GRADS = (
    ("G_X", "label.grad_x", "label.via_allreduce"),    # partial terms: AllReduce(sum), operator f
    ("G_W1", "label.grad_w1", "label.via_local"),      # own columns: complete on the rank
    ("G_W2", "label.grad_w2", "label.via_local"),      # own rows: complete on the rank
)


def render_backward(controls: dict, lang: str) -> dict:
    """Per-rank gradients and the two independent checks of the assembled ones."""
    tp = parse_controls(SECTIONS["backward"].controls, controls)["tp"]
    res = mlp.default_run(tp)
    keys = ("G_H", "G_Z", "G_W1", "G_W2", "G_X_partial")
    # One shading scale per column; G_X_partial reads against the summed G_X.
    whole = {"G_X_partial": [res.sharded.G_X]}
    scales = {k: tree.scale_of(*(getattr(rk, k) for rk in res.ranks), *whole.get(k, [])) for k in keys}
    rows = [[tree.rank_tag(rk.rank)] + [tree.grid(getattr(rk, k), rank=rk.rank, scale=scales[k]) for k in keys]
            for rk in res.ranks]
    # Assembled from the ranks' shards: G_W₁'s column blocks and G_W₂'s row blocks tinted by
    # the rank that computed them; G_X is a sum (grey).
    blocks = {"G_W1": {"cols": tree.block_ranks(res.sharded.G_W1.shape[1], tp)},
              "G_W2": {"rows": tree.block_ranks(res.sharded.G_W2.shape[0], tp)}}
    check = [[label(name_key), label(how_key), tree.grid(getattr(res.sharded, key), **blocks.get(key, {})),
              fmt.err(res.max_abs_err[key]), fmt.within(res.finite_difference[key], FD_TOL)]
             for key, name_key, how_key in _GRADS]
    return {
        "controls": {"tp": str(tp)},
        "tables": {
            "backward-grads": table("cap.backward_grads",
                                    ["col.rank", "col.g_h", "col.g_z", "col.g_w1", "col.g_w2", "col.g_x_partial"],
                                    rows),
            "grad-check": table("cap.grad_check",
                                ["col.gradient", "col.assembled_by", "col.value", "col.err_reference",
                                 "col.err_finite_diff"], check),
        },
        "values": {"fd-step": fmt.num(mlp.FD_STEP, 6)},
        "figures": {"backward": figure_backward(res)},
    }


def render_dp_tp(controls: dict, lang: str) -> dict:
    """The four reductions of dp × tp gradients against the full-batch unsharded gradient."""
    c = parse_controls(SECTIONS["dp-tp"].controls, controls)
    tp, dp = c["tp"], c["dp"]
    res = dp_tp.run_dp_tp(tp=tp, dp=dp)
    steps = [dp_tp.update_scales(v, res.variants[0]) for v in res.variants]    # variants[0]: "correct"
    rows = [[label(f"label.variant_{v.name}"), v.description,
             fmt.err(v.max_abs_err), fmt.num(v.scale), fmt.num(st["sgd"]), fmt.num(st["adam"])]
            for v, st in zip(res.variants, steps)]
    return {
        "controls": {"tp": str(tp), "dp": str(dp)},
        "tables": {"dp-tp": table("cap.dp_tp", ["col.variant", "col.what_it_does", "col.max_abs_err", "col.scale",
                                                "col.step_sgd", "col.step_adam"], rows)},
        "values": {"world-size": fmt.integer(dp * tp), "global-batch": fmt.integer(dp * res.batch)},
        "notes": {"setup": label("note.dp_tp_setup", dp=fmt.integer(dp), tp=fmt.integer(tp),
                                 batch=fmt.integer(res.batch), seed=fmt.integer(res.seed))},
        "figures": {"dp-tp": figure_dp_tp(res)},
    }


_PRECISION_ROWS = (("Y", "label.q_y"), ("loss", "label.q_loss"), ("G_X", "label.q_g_x"),
                   ("G_W1", "label.q_g_w1"), ("G_W2", "label.q_g_w2"))


@lru_cache(maxsize=8)
def _precision_run(tp: int) -> precision.PrecisionResult:
    """Every dtype at one tp: computed once per tp (a dtype change only picks a row)."""
    return precision.run_precision(tp=tp)




def render_precision(controls: dict, lang: str) -> dict:
    """Max |sharded − unsharded| per quantity for one dtype, and one SGD step (float64)."""
    c = parse_controls(SECTIONS["precision"].controls, controls)
    dtype, tp = c["dtype"], c["tp"]
    res = _precision_run(tp)
    row = next(r for r in res.dtypes if r.dtype == dtype)
    rows, drawn = [], []
    for key, name_key in _PRECISION_ROWS:
        err, tol = row.max_abs_err[key], row.tolerances[key]
        rows.append([label(name_key), fmt.diff(err), fmt.err(tol), label("label.yes" if err <= tol else "label.no")])
        drawn.append((key, err, tol))
    ce_err, ce_tol = row.ce_abs_diff, row.ce_tolerance
    drawn.append(("ce", ce_err, ce_tol))
    rows.append([label("label.q_ce"), fmt.diff(ce_err), fmt.err(ce_tol),
                 label("label.yes" if ce_err <= ce_tol else "label.no")])
    sgd = res.sgd
    sgd_rows = []
    for p in ("W1", "W2"):
        sharded, reference = getattr(sgd, f"{p}_sharded"), getattr(sgd, f"{p}_reference")
        top = tree.scale_of(sharded, reference)
        sgd_rows.append([label(f"label.param_{p.lower()}"), tree.grid(sharded, scale=top),
                         tree.grid(reference, scale=top), fmt.err(sgd.max_abs_err[p])])
    return {
        "controls": {"dtype": dtype, "tp": str(tp)},
        "tables": {
            "precision": table("cap.precision", ["col.quantity", "col.max_abs_err", "col.tolerance",
                                                 "col.within"], rows),
            "sgd-step": table("cap.sgd_step", ["col.parameter", "col.sgd_sharded", "col.sgd_reference",
                                               "col.max_abs_err"], sgd_rows),
        },
        "values": {
            "lr": fmt.num(sgd.lr),
            "loss-before": fmt.num(sgd.loss_before),
            "loss-after": fmt.num(sgd.loss_after),
            "loss-after-reference": fmt.num(sgd.loss_after_reference),
        },
        "notes": {"verdict": label("note.precision_ok" if row.within_tolerance else "note.precision_bad",
                                   dtype=dtype),
                  "order": label("note.precision_one_rank" if tp == 1 else "note.precision_order", tp=str(tp))},
        "figures": {"precision": figure_precision(dtype, drawn)},
    }


SECTIONS = {
    "backward": Section(
        name="backward",
        controls=(Control("tp", "select", "2", options=tuple(str(t) for t in TP_OPTIONS)),),
        real=lambda c: [("mlp", {"tp": c["tp"], "stage": "grads"})],
        render=render_backward,
        tables=("backward-grads", "grad-check"),
        values=("fd-step",),
    ),
    "dp-tp": Section(
        name="dp-tp",
        controls=(Control("tp", "select", "2", options=tuple(str(t) for t in TP_OPTIONS)),
                  Control("dp", "select", "2", options=tuple(str(d) for d in DP_OPTIONS))),
        render=render_dp_tp,
        tables=("dp-tp",),
        values=("world-size", "global-batch"),
    ),
    "precision": Section(
        name="precision",
        controls=(Control("dtype", "select", "float32", options=precision.PRECISION_DTYPES),
                  Control("tp", "select", "2", options=tuple(str(t) for t in TP_OPTIONS))),
        render=render_precision,
        tables=("precision", "sgd-step"),
        values=("lr", "loss-before", "loss-after", "loss-after-reference"),
    ),
}
