"""Views of page 2 (row parallelism): forward, backward and pairing tables.

Letters (Megatron's ``Y = X A``, A of shape (in, out)):
    B    batch (rows of X)             D    d_in, input features (rows of A)
    O    d_out, output features        tp   tensor-parallel size (number of ranks)
    T    tokens (B · sequence) in the pairing table, h hidden size, F MLP width (d_ff)

Sections
--------
``row-linear``    row- and column-parallel linear side by side, forward (tables ``row-inputs``,
                  ``row-ranks``, ``col-ranks``).
``row-backward``  the same layers backward (``row-bwd-ranks``, ``col-bwd-ranks``) and the
                  collectives each needs (``row-comm``).
``row-pairing``   an MLP (column→row, as Megatron) against the naive row→row and
                  column→column pairings: collectives and elements per rank (``row-pairing``).

Every number comes from :mod:`tpmath.row_linear` or from the shapes, formatted with
:mod:`tpmath.fmt`.
"""

from __future__ import annotations

import numpy as np

from .. import row_linear
from ..collectives import REGISTRY
from ..errors import TPMathError
from ..schedules import bus_bandwidth_factor
from . import Control, Section, parse_controls
from . import tree
from .cells import label
from .. import fmt
from .fig_row_linear import figure_row_backward, figure_row_linear, figure_row_pairing

TP_CHOICES = (1, 2, 4)
PAIRING_TP_CHOICES = (1, 2, 4, 8)



def _divides(tp: int, size: int, name: str, what: str) -> None:
    """Raise (field = the size control) unless tp divides ``size``: Megatron needs equal shards.
    ``what`` names the sentence saying which split needs it (error.split_<what>)."""
    if size % tp:
        raise TPMathError("size_not_divisible", name, name=name, size=size, tp=tp,
                          split=label(f"error.split_{what}", tp=str(tp)))


def linear_controls(values: dict) -> dict:
    """Validated controls of ``row-linear`` / ``row-backward``: tp, batch, d_in, d_out, seed (tp
    dividing both sizes)."""
    c = parse_controls(LINEAR_CONTROLS, values)
    _divides(c["tp"], c["d_in"], "d_in", "row")
    _divides(c["tp"], c["d_out"], "d_out", "column")
    return c


def linear_layers(values: dict) -> tuple[dict, TPMathError | None, TPMathError | None]:
    """(controls, refusal of the row layer, refusal of the column layer).  The layers are checked
    separately: row parallel splits d_in, column parallel d_out, so a size that only one of them
    cannot split leaves the other's result valid (issue 25 item 6).  Both refused: the row
    layer's refusal is raised."""
    c = parse_controls(LINEAR_CONTROLS, values)
    refusals = []
    for size, what in (("d_in", "row"), ("d_out", "column")):
        try:
            _divides(c["tp"], c[size], size, what)
            refusals.append(None)
        except TPMathError as err:
            refusals.append(err)
    if all(refusals):
        raise refusals[0]
    return c, refusals[0], refusals[1]


def run_both(c: dict) -> tuple[row_linear.RowLinearResult, row_linear.ColumnLinearResult]:
    """Row- and column-parallel results on the same X (B, D), A (D, O), dY (B, O)."""
    return run_row(c), run_column(c)


def _example(c: dict) -> dict:
    return row_linear.example_inputs(c["seed"], c["batch"], c["d_in"], c["d_out"])


def run_row(c: dict) -> row_linear.RowLinearResult:
    inp = _example(c)
    return row_linear.run_row_linear(inp["X"], inp["A"], inp["dY"], tp=c["tp"])


def run_column(c: dict) -> row_linear.ColumnLinearResult:
    inp = _example(c)
    return row_linear.run_column_linear(inp["X"], inp["A"], inp["dY"], tp=c["tp"], gather_output=True)


def partial(result: dict, refusal: TPMathError, layer: str, **stale: tuple[str, ...]) -> dict:
    """``result`` of the layer the controls allow, with the other layer's refusal and the parts
    that still show the last valid setting (``{"tables": [NAME…], "values": …, "notes": …,
    "figures": …, "real": true}``: the page keeps them, dimmed, and shows the refusal at its
    control).  ``layer`` is the refused one ("row" or "col"): its own table and value."""
    own = {"row-linear": ("ranks", "max-abs-err"), "row-backward": ("bwd-ranks", "bwd-max-abs-err")}
    table_name, value_name = (f"{layer}-{part}" for part in own[stale.pop("section")])
    kinds = {"tables": [table_name, *stale.get("tables", ())], "values": [value_name],
             "notes": list(stale.get("notes", ())), "figures": list(stale.get("figures", ())), "real": True}
    return {**result, "refused": {"error": refusal.cell, "field": refusal.field}, "stale": kinds}


# The controls of row-linear and row-backward (one record each, shared by both sections).
LINEAR_CONTROLS = (
    Control("tp", "select", 2, options=TP_CHOICES, label="ctl.row_tp", slider=True),
    Control("batch", "number", 2, min=1, max=4, step=1, label="ctl.row_batch", slider=True),
    Control("d_in", "number", 4, min=1, max=8, step=1, label="ctl.row_d_in", slider=True),
    Control("d_out", "number", 4, min=1, max=8, step=1, label="ctl.row_d_out", slider=True),
    Control("seed", "number", 0, min=0, max=2**32 - 1, step=1, label="ctl.row_seed"),
)


def _comm_note(row: row_linear.RowLinearResult, col: row_linear.ColumnLinearResult) -> dict:
    """One sentence naming the collectives of both layers, with their element counts."""
    (rf,) = [c for c in row.comm if c.phase == "forward"]
    (cf,) = [c for c in col.comm if c.phase == "forward"]
    (cb,) = [c for c in col.comm if c.phase == "backward"]
    return label("note.row_linear_comm", tp=str(row.tp), row_fwd=fmt.integer(rf.elements),
                col_fwd=fmt.integer(cf.elements), col_bwd=fmt.integer(cb.elements))


def render_linear(values: dict, lang: str) -> dict:
    """Forward of both layers: inputs, per-rank shards, merged result vs reference (one layer only
    when tp cannot split the other's size: :func:`linear_layers`)."""
    c, row_refused, col_refused = linear_layers(values)
    inp = _example(c)
    inputs = {
        "caption": "cap.row_inputs",
        "columns": ["col.row_tensor", "col.row_shape", "col.row_value"],
        "rows": [[name, f"({inp[k].shape[0]}, {inp[k].shape[1]})", tree.grid(inp[k])]
                 for name, k in (("X", "X"), ("A", "A"))],
    }
    # Shading: a shard reads against the whole tensor, a partial Y against the summed Y.
    sx, sa, sy = tree.scale_of(inp["X"]), tree.scale_of(inp["A"]), tree.scale_of(inp["X"] @ inp["A"])   # Y = X A unsharded
    tables, out = {"row-inputs": inputs}, {}
    if row_refused is None:
        row = run_row(c)
        tables["row-ranks"] = {
            "caption": "cap.row_ranks",
            "columns": ["col.row_rank", "col.row_x_shard", "col.row_a_shard", "col.row_y_partial"],
            "rows": [[tree.rank_tag(r.rank)] + _grids(r, ("X_shard", sx), ("A_shard", sa), ("Y_partial", sy))
                     for r in row.ranks],
            "foot": [
                [label("label.row_allreduce_y"), "", "", tree.grid(row.Y, scale=sy)],
                [label("label.row_reference_y"), "", "", tree.grid(row.reference.Y, scale=sy)],
                [label("label.row_max_abs_err"), "", "", fmt.err(row.max_abs_err["Y"])],
            ],
        }
        out["row-max-abs-err"] = fmt.err(row.max_abs_err["Y"])
    if col_refused is None:
        col = run_column(c)
        tables["col-ranks"] = {
            "caption": "cap.row_col_ranks",
            "columns": ["col.row_rank", "col.row_a_shard", "col.row_y_shard"],
            "rows": [[tree.rank_tag(r.rank)] + _grids(r, ("A_shard", sa), ("Y_shard", sy)) for r in col.ranks],
            "foot": [
                # AllGather: block r of Y came from rank r (the figure's tinted column blocks).
                [label("label.row_allgather_y"), "", tree.grid(col.Y, scale=sy, cols=_blocks(col.Y, 1, c["tp"]))],
                [label("label.row_reference_y"), "", tree.grid(col.reference.Y, scale=sy)],
                [label("label.row_max_abs_err"), "", fmt.err(col.max_abs_err["Y"])],
            ],
        }
        out["col-max-abs-err"] = fmt.err(col.max_abs_err["Y"])
    result = {"controls": c, "tables": tables, "values": out}
    if row_refused or col_refused:        # the note and the figure show both layers
        return partial(result, row_refused or col_refused, "row" if row_refused else "col", section="row-linear",
                       notes=("row-linear-comm",), figures=("row-linear",))
    return {**result, "notes": {"row-linear-comm": _comm_note(row, col)},
            "figures": {"row-linear": figure_row_linear(row, col)}}


def _blocks(a: np.ndarray, axis: int, tp: int) -> list[int]:
    """The rank whose shard each column (axis 1) or row (axis 0) of an assembled ``a`` is."""
    return tree.block_ranks(np.shape(a)[axis], tp)


def _grids(rank_result: row_linear.RowRank | row_linear.ColumnRank, *keys: tuple[str, float]) -> list[dict]:
    """Grid cells of one rank's matrices ``(field, shading scale)``, tinted by that rank."""
    r = rank_result.rank
    return [tree.grid(getattr(rank_result, k), rank=r, scale=top) for k, top in keys]


def comm_rows(row: row_linear.RowLinearResult, col: row_linear.ColumnLinearResult) -> list[list]:
    """Rows of ``row-comm``: layer, phase, collective, elements of the full tensor, and the
    elements one rank sends with the ring algorithm (0 when tp = 1: the collective is a no-op)."""
    rows = []
    for layer_key, result in (("label.row_layer_row", row), ("label.row_layer_col", col)):
        n = result.tp
        for c in result.comm:
            none = c.collective == "none"
            sent = 0.0 if none else bus_bandwidth_factor(c.collective, n) * c.elements
            rows.append([label(layer_key), label(f"label.row_phase_{c.phase}"),
                         label("label.row_no_comm") if none else REGISTRY[c.collective].nccl,
                         fmt.integer(c.elements), fmt.num(sent)])
    return rows


def render_backward(values: dict, lang: str) -> dict:
    """Backward of both layers: per-rank gradients, assembled vs reference, collectives (one layer
    only when tp cannot split the other's size: :func:`linear_layers`)."""
    c, row_refused, col_refused = linear_layers(values)
    inp = _example(c)
    dY = inp["dY"]
    # Shading: shards and partial sums read against the whole gradient (dX = dY Aᵀ, dA = Xᵀ dY).
    sdy, sdx, sda = (tree.scale_of(a) for a in (dY, dY @ inp["A"].T, inp["X"].T @ dY))
    tables, out = {}, {}
    if row_refused is None:
        row = run_row(c)
        tables["row-bwd-ranks"] = {
            "caption": "cap.row_bwd_ranks",
            "columns": ["col.row_rank", "col.row_dy_full", "col.row_dx_shard", "col.row_da_shard"],
            # Rank r's copy of dY: framed by rank r, its numbers grey (replicated, as in the figure).
            "rows": [[tree.rank_tag(r.rank), tree.grid(dY, rank=r.rank, scale=sdy, rows=[None] * dY.shape[0])]
                     + _grids(r, ("dX_shard", sdx), ("dA_shard", sda)) for r in row.ranks],
            "foot": [
                [label("label.row_concat_shards"), "",
                 tree.grid(row.sharded.dX, scale=sdx, cols=_blocks(row.sharded.dX, 1, c["tp"])),
                 tree.grid(row.sharded.dA, scale=sda, rows=_blocks(row.sharded.dA, 0, c["tp"]))],
                [label("label.row_reference"), "", tree.grid(row.reference.dX, scale=sdx),
                 tree.grid(row.reference.dA, scale=sda)],
                [label("label.row_max_abs_err"), "", fmt.err(row.max_abs_err["dX"]), fmt.err(row.max_abs_err["dA"])],
            ],
        }
        out["row-bwd-max-abs-err"] = fmt.err(max(row.max_abs_err["dX"], row.max_abs_err["dA"]))
    if col_refused is None:
        col = run_column(c)
        tables["col-bwd-ranks"] = {
            "caption": "cap.row_col_bwd_ranks",
            "columns": ["col.row_rank", "col.row_dy_shard", "col.row_dx_partial", "col.row_col_da_shard"],
            "rows": [[tree.rank_tag(r.rank)] + _grids(r, ("dY_shard", sdy), ("dX_partial", sdx), ("dA_shard", sda))
                     for r in col.ranks],
            "foot": [
                [label("label.row_allreduce_dx"), "", tree.grid(col.sharded.dX, scale=sdx),
                 tree.grid(col.sharded.dA, scale=sda, cols=_blocks(col.sharded.dA, 1, c["tp"]))],
                [label("label.row_reference"), "", tree.grid(col.reference.dX, scale=sdx),
                 tree.grid(col.reference.dA, scale=sda)],
                [label("label.row_max_abs_err"), "", fmt.err(col.max_abs_err["dX"]), fmt.err(col.max_abs_err["dA"])],
            ],
        }
        out["col-bwd-max-abs-err"] = fmt.err(max(col.max_abs_err["dX"], col.max_abs_err["dA"]))
    result = {"controls": c, "tables": tables, "values": out,
              "notes": {"row-backward": label("note.row_backward", tp=str(c["tp"]))}}
    if row_refused or col_refused:        # the collectives table and the figure show both layers
        return partial(result, row_refused or col_refused, "row" if row_refused else "col", section="row-backward",
                       tables=("row-comm",), figures=("row-backward",))
    tables["row-comm"] = {
        "caption": "cap.row_comm",
        "columns": ["col.row_layer", "col.row_phase", "col.row_collective", "col.row_elements",
                    "col.row_sent_ring"],
        "rows": comm_rows(row, col),
    }
    return {**result, "figures": {"row-backward": figure_row_backward(row, col)}}


# ---------------------------------------------------------------- pairing

def pairing_controls(values: dict) -> dict:
    """Validated controls of ``row-pairing``: tp, tokens, hidden, ffn."""
    c = parse_controls(SECTIONS["row-pairing"].controls, values)
    _divides(c["tp"], c["hidden"], "hidden", "hidden")
    _divides(c["tp"], c["ffn"], "ffn", "ffn")
    return c


def pairing_schemes(T: int, h: int, F: int) -> list[dict]:
    """The collectives ``(name, elements, shape symbol)`` of one MLP block per pairing.

    The block's input and output (T, h) are replicated, as between Megatron's blocks.

    column→row (Megatron): g after the row layer (AllReduce T·h), f before the column layer
        (backward AllReduce T·h); the activation between them stays split.
    row→row: layer 1's output is a partial sum: AllReduce T·F before GeLU; layer 2 AllReduce
        T·h.  Both layers split a replicated input locally, whose backward is an AllGather
        of the input gradient: dH (T·F) and dX (T·h).
    column→column: layer 2 needs the whole hidden activation: AllGather T·F; the output must
        be whole again for the residual: AllGather T·h.  Backward: the partial dH of layer 2
        is reduced and split (ReduceScatter T·F, the backward of AllGather), and f sums dX
        (AllReduce T·h); the gradient of the gathered output is split locally.
    """
    th, tf = (T * h, "T×h"), (T * F, "T×F")
    return [
        {"name": "column-row", "forward": [("all-reduce", *th)], "backward": [("all-reduce", *th)]},
        {"name": "row-row", "forward": [("all-reduce", *tf), ("all-reduce", *th)],
         "backward": [("all-gather", *tf), ("all-gather", *th)]},
        {"name": "column-column", "forward": [("all-gather", *tf), ("all-gather", *th)],
         "backward": [("reduce-scatter", *tf), ("all-reduce", *th)]},
    ]


def sent_per_rank(ops: list[tuple[str, int, str]], n: int) -> float:
    """Elements one rank sends for ``ops`` with the ring algorithm (bus-bandwidth factor × size)."""
    return sum(bus_bandwidth_factor(name, n) * elements for name, elements, _ in ops)


def _ops_cell(ops: list[tuple[str, int, str]]) -> str:
    """``AllReduce T×F + AllReduce T×h`` (shape symbols are language-neutral)."""
    return " + ".join(f"{REGISTRY[name].nccl} {symbol}" for name, _, symbol in ops)


def _ratio(sent: float, base: float) -> str:
    """``×2.75``: elements sent relative to Megatron's column→row ("—" when tp = 1: nothing is sent)."""
    return "—" if base == 0 else "×" + fmt.num(sent / base, 2)


def render_pairing(values: dict, lang: str) -> dict:
    """Per MLP block: collectives, elements per rank (ring), vs Megatron's column→row."""
    c = pairing_controls(values)
    n, T, h, F = c["tp"], c["tokens"], c["hidden"], c["ffn"]
    schemes = pairing_schemes(T, h, F)
    base = sent_per_rank(schemes[0]["forward"], n) + sent_per_rank(schemes[0]["backward"], n)
    rows = []
    for s in schemes:
        fwd = sent_per_rank(s["forward"], n)
        bwd = sent_per_rank(s["backward"], n)
        rows.append([label(f"label.row_scheme_{s['name'].replace('-', '_')}"),
                     _ops_cell(s["forward"]), _ops_cell(s["backward"]),
                     f"{fmt.integer(round(fwd))} + {fmt.integer(round(bwd))}", _ratio(fwd + bwd, base)])
    layer_fwd = 2 * sent_per_rank(schemes[0]["forward"], n)
    layer_bwd = 2 * sent_per_rank(schemes[0]["backward"], n)
    foot = [[label("label.row_scheme_layer"), "2 × AllReduce T×h", "2 × AllReduce T×h",
             f"{fmt.integer(round(layer_fwd))} + {fmt.integer(round(layer_bwd))}",
             _ratio(layer_fwd + layer_bwd, base)]]
    table = {
        "caption": "cap.row_pairing",
        "columns": ["col.row_scheme", "col.row_forward", "col.row_backward", "col.row_sent_fwd_bwd",
                    "col.row_vs_megatron"],
        "rows": rows, "foot": foot,
    }
    return {
        "controls": c,
        "tables": {"row-pairing": table},
        "values": {"pairing-ring-factor": fmt.num(bus_bandwidth_factor("all-reduce", n))},
        "notes": {"row-pairing": label("note.row_pairing", T=fmt.integer(T), h=fmt.integer(h),
                                      F=fmt.integer(F), tp=str(n))},
        "figures": {"row-pairing": figure_row_pairing(n, schemes, rows)},
    }


def real_runs(c: dict, stage: str) -> list[tuple[str, dict]]:
    """Both layers of the section on real ranks, with the page's example inputs."""
    given = {"tp": c["tp"], "seed": c["seed"], "batch": c["batch"], "d_in": c["d_in"], "d_out": c["d_out"],
             "stage": stage}
    return [("row-linear", given), ("column-linear", given)]


SECTIONS = {
    "row-linear": Section("row-linear", LINEAR_CONTROLS, render_linear,
                          tables=("row-inputs", "row-ranks", "col-ranks"),
                          values=("row-max-abs-err", "col-max-abs-err"),
                          real=lambda c: real_runs(c, "forward")),
    "row-backward": Section("row-backward", LINEAR_CONTROLS, render_backward,
                            tables=("row-bwd-ranks", "col-bwd-ranks", "row-comm"),
                            values=("row-bwd-max-abs-err", "col-bwd-max-abs-err"),
                            real=lambda c: real_runs(c, "backward")),
    "row-pairing": Section("row-pairing", (
        Control("tp", "select", 4, options=PAIRING_TP_CHOICES, label="ctl.row_tp", slider=True),
        Control("tokens", "number", 8192, min=1, max=10**7, step=1, label="ctl.row_tokens", slider="log"),
        Control("hidden", "number", 4096, min=1, max=10**6, step=1, label="ctl.row_hidden", slider="log"),
        Control("ffn", "number", 16384, min=1, max=10**6, step=1, label="ctl.row_ffn", slider="log"),
    ), render_pairing, tables=("row-pairing",), values=("pairing-ring-factor",)),
}
