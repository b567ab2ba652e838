"""Views of page 4 (sequence parallelism): sections ``sp-layer``, ``dropout`` and ``memory``.

``sp-layer`` shows :func:`tpmath.sp_layer.run_sp_layer` on the page's small block (B = 1,
D = 4, F = 8, seed 0; tp, S, the mistake, dropout and the pass are controls).  Letters as in
the core: T = tp ranks, S tokens, Sl = S/T tokens per rank, D hidden, F MLP width, Fl = F/T.
Tables: ``sp-ranks`` (what each rank holds and computes in the chosen pass, merged and
compared with one device), ``sp-comm`` (the collectives of TP + SP and of plain TP with their
elements), ``sp-ln`` (the partial γ/β gradients and their AllReduce), ``sp-masks`` (dropout
masks and their counters, when dropout is on) and ``sp-check`` (every output and gradient
against one device).  The one-device intermediates are the same core run with tp = 1.

``dropout`` draws each rank's dropout mask (:func:`tpmath.sp_layer.rank_dropout_masks`) for a
replicated tensor and for token shards, under one seed for every rank and under Megatron's
seed + 2718 + rank; table ``dr-masks``: each rank's generator keys and zeroed entries.

``memory`` is the calculator of :func:`tpmath.memory.memory` (Korthikanti et al. 2022,
Table 2, plus the model states): a preset fills the model's sizes (the paper's Table 3
presets also its parallel settings) and disables those fields; "custom" frees them.  Its
second figure, ``memory-layer``, splits one layer's activations by what divides them.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from .. import memory as mem
from .. import sp_layer as core
from ..collectives import REGISTRY, reduce_all
from .. import fmt
from ..errors import TPMathError
from ..i18n import option
from . import Control, Section, parse_controls, tree
from .cells import id_range, label, table
from .fig_sp_layer import DROPOUT_CASES, figure_dropout, figure_ln, figure_memory, figure_memory_layer, figure_sp

# ------------------------------------------------------------------------------ sp-layer

TP_OPTIONS = (1, 2, 4)
SEQ_OPTIONS = (4, 8)
DROPOUT_OPTIONS = ("0", "0.1", "0.25", "0.5")
BATCH, HIDDEN, FFN, SEED = 1, 4, 8, 0       # the page's block (b = 1: a matrix per tensor)

# The steps of the block, in order: (step, pass, its two table columns).  A column is (core key,
# column i18n key, how the ranks' values merge into the one-device tensor): "seq" concatenates token
# shards (axis 1 of (b, ·, ·)), "cols" the F/t column shards (axis 2), "sum" adds partial terms (the
# reduction of a ReduceScatter), "all" is a tensor every rank holds whole (each copy is compared),
# "w1" / "w2" are weight-gradient shards (columns of W₁, rows of W₂).
STEPS = (
    ("ln", "forward", (("X", "col.sp_x", "seq"), ("A", "col.sp_a", "seq"))),
    ("gather", "forward", (("A", "col.sp_a", "seq"), ("A_full", "col.sp_a_full", "all"))),
    ("tp", "forward", (("Hd", "col.sp_h", "cols"), ("O_partial", "col.sp_hw2", "sum"))),
    ("scatter", "forward", (("O_partial", "col.sp_hw2", "sum"), ("O", "col.sp_o", "seq"))),
    ("residual", "forward", (("O", "col.sp_o", "seq"), ("Y", "col.sp_y", "seq"))),
    ("grad-gather", "backward", (("G_Y", "col.sp_gy", "seq"), ("G_O_full", "col.sp_go_full", "all"))),
    ("grad-w", "backward", (("G_W2", "col.sp_gw2", "w2"), ("G_W1", "col.sp_gw1", "w1"))),
    ("grad-scatter", "backward", (("G_A_partial", "col.sp_gzw1", "sum"), ("G_A", "col.sp_ga", "seq"))),
    ("grad-ln", "backward", (("G_A", "col.sp_ga", "seq"), ("G_X", "col.sp_gx", "seq"))),
)
STEP_NAMES = tuple(name for name, _, _ in STEPS)
PASS = {name: phase for name, phase, _ in STEPS}
_COLUMNS = {name: cols for name, _, cols in STEPS}
_AXIS = {"seq": 1, "cols": 2, "w1": 1, "w2": 0}
# how a tensor of the core's comm list is written on the page (collectives: their NCCL names)
TENSOR = {"LN(X)": "A = LN(X)", "O": "O", "G_O": "G_O", "G_A": "G_A", "G_gamma, G_beta": "G_γ, G_β",
          "LN(X) again": label("label.sp_tensor_regather")}
CHECK = {True: "✓", False: "✗"}
QUANTITY = {"Y": "Y", "loss": "ℒ", "G_X": "G_X", "G_gamma": "G_γ", "G_beta": "G_β", "G_W1": "G_W₁", "G_W2": "G_W₂"}


@lru_cache(maxsize=64)
def run(tp: int, seq: int, mistake: str, dropout: float, backward_input: str = "regather") -> core.SpLayerResult:
    """The core on the page's block: a pure function of the controls, computed once per setting
    (the views only read it)."""
    return core.run_sp_layer(tp=tp, seq=seq, batch=BATCH, hidden=HIDDEN, ffn=FFN, seed=SEED,
                             mistake=mistake, dropout=dropout, backward_input=backward_input)


def one_device(seq: int, dropout: float) -> core.SpRank:
    """Every intermediate of one device: the same block with tp = 1 (masks = the one-device ones)."""
    return run(1, seq, "none", dropout).ranks[0]


def sp_controls(values: dict) -> tuple[dict, dict, dict]:
    """(validated controls, control_state, notes).  One rank leaves nothing to get wrong, so the
    mistake control is disabled there; the dropout mistake needs a mask, so it raises p = 0 to the
    core's demo probability and says so."""
    given = parse_controls(SECTIONS["sp-layer"].controls, {**values, "dropout": _dropout_text(values["dropout"])})
    tp, seq, mistake, dropout, step, backward_input = (
        given[k] for k in ("tp", "seq", "mistake", "dropout", "step", "backward_input"))
    state, notes = {}, {}
    if tp == 1:
        mistake = "none"
        state["mistake"] = {"disabled": True, "value": "none", "why": label("note.sp_why_one_rank")}
        # nothing is gathered on one rank: both choices send nothing (the control keeps its value)
        state["backward_input"] = {"disabled": True, "why": label("note.sp_why_one_rank_gather")}
    if mistake == "same-dropout-seed":
        # the mistake needs a mask: p = 0 is offered disabled with the reason, rather than taken
        # and then undone (a link or the command line giving p = 0 still gets the note below)
        state["dropout"] = {"disabled": False, "options": {"0": label("note.sp_why_dropout_mask", mistake=option("mistake", "same-dropout-seed"))}}
        if dropout == "0":
            dropout = _dropout_text(core.DEMO_DROPOUT)
            state["dropout"]["value"] = dropout
            notes["sp-dropout-set"] = label("note.sp_dropout_set", p=dropout)
    c = {"tp": str(tp), "seq": str(seq), "mistake": mistake, "dropout": dropout, "step": step,
         "backward_input": backward_input}
    return c, state, notes


def _dropout_text(value: Any) -> str:
    """A dropout value as the select writes it ("0.25"); numbers from JSON become the same text."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return fmt.num(value)
    return str(value).strip()


DECIMALS = 3     # two (s × h) matrices side by side fit a desktop column with 3 decimals, not with 4


def _rows2(a: np.ndarray) -> np.ndarray:
    """A (b = 1, rows, cols) tensor of the block as its (rows, cols) matrix; weights as they are."""
    a = np.asarray(a, dtype=np.float64)
    return a.reshape(-1, a.shape[-1]) if a.ndim == 3 else a


def _scale(*arrays: np.ndarray) -> float:
    """One shading scale for a column: every rank's entry and the one-device tensor shade alike."""
    return max(float(np.max(np.abs(a))) for a in arrays)


def _grid(a: np.ndarray, owner: int | None, scale: float, decimals: int = DECIMALS) -> dict:
    """A matrix cell tinted by the rank holding it (None: the one-device / merged tensor)."""
    return tree.grid(_rows2(a), rank=owner, decimals=decimals, scale=scale)


def shown_err(err: float) -> str:
    """A measured difference from one device by the site's one rule (fmt.err).  The core computes
    in a fixed order (kernels.*_fixed): the same digits at build time, in the browser and on the
    command line."""
    return fmt.err(err)


def worst_err(res: core.SpLayerResult) -> str:
    """The largest measured difference of any output or gradient (the tolerances: sp-check's column)."""
    return fmt.err(max(res.max_abs_err[k] for k in core.RESULT_KEYS))


def _merge(parts: list[np.ndarray], how: str) -> np.ndarray:
    """Combine the ranks' values into the one-device quantity (see STEPS)."""
    if how == "sum":
        return reduce_all(parts, "sum")                    # rank order, as the collective adds
    if how == "all":
        return parts[0]                                    # every copy is checked in _err
    return np.concatenate(parts, axis=_AXIS[how])


def _err(parts: list[np.ndarray], merged: np.ndarray, ref: np.ndarray, how: str) -> float:
    """Largest |merged − one device|; for a tensor every rank holds, the worst copy."""
    copies = parts if how == "all" else [merged]
    return max(float(np.max(np.abs(c - ref))) for c in copies)


BY_COLUMNS = ("tp", "grad-w")        # steps whose shards are columns of F (the others: tokens)


def _ranks_table(res: core.SpLayerResult, one: core.SpRank, step: str) -> dict:
    cols = _COLUMNS[step]
    by_cols = step in BY_COLUMNS
    parts = [[getattr(rk, key) for rk in res.ranks] for key, _, _ in cols]
    merged = [_merge(p, how) for p, (_, _, how) in zip(parts, cols)]
    ref = [getattr(one, key) for key, _, _ in cols]
    scales = [_scale(r, *p) for p, r in zip(parts, ref)]
    rows = [[tree.rank_tag(rk.rank), id_range(*getattr(rk, "ffn_range" if by_cols else "seq_range"))]
            + [_grid(getattr(rk, key), rk.rank, sc) for (key, _, _), sc in zip(cols, scales)]
            for rk in res.ranks]
    foot = [
        [label("label.sp_one_device"), ""] + [_grid(a, None, sc) for a, sc in zip(ref, scales)],
        [label("label.sp_merged"), ""] + [_grid(m, None, sc) for m, sc in zip(merged, scales)],
        [label("label.sp_max_err"), ""] + [shown_err(_err(p, m, a, how))
                                               for p, m, a, (_, _, how) in zip(parts, merged, ref, cols)],
    ]
    headers = [("col.sp_hd" if key == "Hd" and res.dropout > 0 else col) for key, col, _ in cols]
    return table(f"cap.sp_step_{step.replace('-', '_')}",
                 ["col.rank", "col.sp_ffn_cols" if by_cols else "col.sp_tokens"] + headers, rows, foot)


def _comm_row(c: core.SpComm, scheme: str, tp: int) -> list:
    """One collective: scheme and pass, operator, NCCL name, tensor, elements, elements each rank sends."""
    op = "γ, β" if c.operator == "LN" else c.operator
    return [label(f"label.sp_{scheme}_{c.phase}"), op, REGISTRY[c.collective].nccl, TENSOR[c.tensor],
            fmt.integer(c.elements), fmt.num(core.ring_elements_per_rank(c.collective, c.elements, tp))]


def _comm_table(res: core.SpLayerResult) -> dict:
    tp = res.tp
    plain = res.plain_tp
    rows = [_comm_row(c, "sp", tp) for c in res.comm] + [_comm_row(c, "tp", tp) for c in plain.comm]
    blank = ["", "", "", ""]
    foot = [[label("label.sp_total_sp")] + blank + [fmt.num(res.comm_per_rank["block"])],
            [label("label.sp_total_tp")] + blank + [fmt.num(plain.comm_per_rank["block"])],
            [label("label.sp_total_ln")] + blank + [fmt.num(res.comm_per_rank["ln_grads"])]]
    return table("cap.sp_comm", ["col.sp_scheme_pass", "col.sp_operator", "col.sp_collective", "col.sp_tensor",
                                 "col.sp_elements", "col.sp_sent"], rows, foot)


def _ln_table(res: core.SpLayerResult) -> dict:
    """Each rank's γ/β gradients from its own tokens, then what every rank steps with: their sum
    after the AllReduce (or, under the mistake, each rank's own row), against one device."""
    ranks = res.ranks
    ref = res.reference
    sg = _scale(ref.G_gamma, *(rk.G_gamma_partial for rk in ranks))
    sb = _scale(ref.G_beta, *(rk.G_beta_partial for rk in ranks))
    rows = [[tree.rank_tag(rk.rank), id_range(*rk.seq_range), _grid(rk.G_gamma_partial, rk.rank, sg, 4),
             _grid(rk.G_beta_partial, rk.rank, sb, 4)] for rk in ranks]
    err_g = max(float(np.max(np.abs(rk.G_gamma - ref.G_gamma))) for rk in ranks)
    err_b = max(float(np.max(np.abs(rk.G_beta - ref.G_beta))) for rk in ranks)
    if res.mistake == "ln-grad-not-reduced":
        used = [label("label.sp_ln_none"), "", "—", "—"]
    else:
        used = [label("label.sp_ln_sum"), "", _grid(ranks[0].G_gamma, None, sg, 4),
                _grid(ranks[0].G_beta, None, sb, 4)]
    foot = [used,
            [label("label.sp_one_device"), "", _grid(ref.G_gamma, None, sg, 4), _grid(ref.G_beta, None, sb, 4)],
            [label("label.sp_max_err"), "", shown_err(err_g), shown_err(err_b)]]
    return table("cap.sp_ln", ["col.rank", "col.sp_tokens", "col.sp_g_gamma_partial", "col.sp_g_beta_partial"],
                 rows, foot)


def mask_counters(res: core.SpLayerResult, rk: core.SpRank) -> tuple[tuple[int, int], tuple[int, int]]:
    """The counter ranges [a, b) rank rk draws its H and O masks from (see tpmath.sp_layer)."""
    B, S, D, F, T = res.batch, res.seq, res.hidden, res.ffn, res.tp
    h_local, o_local = B * S * (F // T), B * (S // T) * D
    rng = rk.rng
    return (rng.tp_offset, rng.tp_offset + h_local), (rng.sp_offset, rng.sp_offset + o_local)


def mask_is_block(res: core.SpLayerResult, one: core.SpRank, rk: core.SpRank) -> bool:
    """Whether rank rk's two masks are its blocks of the one-device masks."""
    (a, b), (c, d) = rk.seq_range, rk.ffn_range
    return bool(np.array_equal(rk.keep_H, one.keep_H[:, :, c:d])
                and np.array_equal(rk.keep_O, one.keep_O[:, a:b]))


def _mask(m: np.ndarray, owner: int | None) -> dict:
    """A keep-mask as a grid of 1 (kept, shaded) and 0 (dropped, blank)."""
    return _grid(m.astype(np.float64), owner, 1.0, 0)


def _masks_table(res: core.SpLayerResult, one: core.SpRank) -> dict:
    rows = []
    for rk in res.ranks:
        (h0, h1), (o0, o1) = mask_counters(res, rk)
        rows.append([tree.rank_tag(rk.rank), id_range(h0, h1), _mask(rk.keep_H, rk.rank), id_range(o0, o1),
                     _mask(rk.keep_O, rk.rank), CHECK[mask_is_block(res, one, rk)]])
    n_h = one.keep_H.size
    foot = [[label("label.sp_one_device"), id_range(0, n_h), _mask(one.keep_H, None),
             id_range(n_h, n_h + one.keep_O.size), _mask(one.keep_O, None), ""]]
    return table("cap.sp_masks", ["col.rank", "col.sp_h_counters", "col.sp_h_mask", "col.sp_o_counters",
                                  "col.sp_o_mask", "col.sp_mask_is_block"], rows, foot)


def _check_table(res: core.SpLayerResult) -> dict:
    rows = []
    for k in core.RESULT_KEYS:
        err, tol = res.max_abs_err[k], res.tolerances[k]
        shape = np.shape(getattr(res.reference, k))
        rows.append([QUANTITY[k], "×".join(fmt.integer(s) for s in shape) or "1", shown_err(err), fmt.err(tol),
                     CHECK[err <= tol], shown_err(res.plain_tp.max_abs_err[k])])
    return table("cap.sp_check", ["col.sp_quantity", "col.shape", "col.sp_err_sp", "col.tolerance", "col.sp_within",
                                  "col.sp_err_tp"], rows)


def _notes(res: core.SpLayerResult, c: dict) -> dict:
    m, tp, seq = c["mistake"], res.tp, res.seq
    worst = worst_err(res)
    notes = {"sp-mistake": label(f"note.sp_mistake_{m.replace('-', '_')}", err=worst, tp=fmt.integer(tp))}
    if m == "gather-wrong-dim" and seq == tp:
        notes["sp-noop"] = label("note.sp_gather_noop", seq=fmt.integer(seq), tp=fmt.integer(tp))
    if res.dropout > 0:
        notes["sp-dropout"] = label("note.sp_dropout", p=c["dropout"], tp=fmt.integer(tp))
    if tp > 1:
        notes["sp-bytes"] = _bytes_note(res)
    return notes


def _bytes_note(res: core.SpLayerResult) -> dict:
    """What TP + SP sends per block next to plain TP, from the core's comm lists (module doc of
    tpmath.sp_layer: Megatron's re-gather of the linear's input)."""
    sp, plain = res.comm_per_rank["block"], res.plain_tp.comm_per_rank["block"]
    halves = sum(1 for c in res.comm if c.operator != "LN")
    args = {"sp": fmt.num(sp), "tp": fmt.num(plain), "n": fmt.integer(halves),
            "extra": _percent(100 * (sp / plain - 1), 0), "tokens": fmt.integer(res.seq // res.tp),
            "seq": fmt.integer(res.seq)}
    return label(f"note.sp_bytes_{res.backward_input}", **args)


def render_sp_layer(values: dict, lang: str) -> dict:
    """The block for one setting: tables, values, notes, figures, control state."""
    c, state, notes = sp_controls(values)
    tp, seq, p = int(c["tp"]), int(c["seq"]), float(c["dropout"])
    res = run(tp, seq, c["mistake"], p, c["backward_input"])
    one = one_device(seq, p)
    tables = {"sp-ranks": _ranks_table(res, one, c["step"]), "sp-comm": _comm_table(res), "sp-ln": _ln_table(res),
              "sp-check": _check_table(res)}
    if p > 0:                    # after the declared tables, where the page adds a table it had not shown
        tables["sp-masks"] = _masks_table(res, one)
    notes["sp-step"] = label(f"note.sp_step_{c['step'].replace('-', '_')}", tp=c["tp"], s=c["seq"],
                              sl=fmt.integer(int(c["seq"]) // int(c["tp"])))
    notes.update(_notes(res, c))
    return {
        "controls": c,
        "control_state": state,
        "tables": tables,
        "figures": {"sp-layer": figure_sp(c["step"], res, one), "sp-ln": figure_ln(res)},
        "values": {
            "sp-loss": fmt.num(res.sharded.loss),
            "sp-reference-loss": fmt.num(res.reference.loss),
            "sp-max-err": worst_err(res),
            "sp-sent": fmt.num(res.comm_per_rank["block"]),
            "tp-sent": fmt.num(res.plain_tp.comm_per_rank["block"]),
        },
        "notes": notes,
    }


def _real(c: dict) -> list[tuple[str, dict]]:
    """The same block on real ranks (``python -m tpmath.real sp-layer``)."""
    return [("sp-layer", {"tp": c["tp"], "seq": c["seq"], "batch": str(BATCH), "hidden": str(HIDDEN),
                          "ffn": str(FFN), "seed": str(SEED), "mistake": c["mistake"],
                          "dropout": None if c["dropout"] == "0" else c["dropout"], "stage": PASS[c["step"]]})]


# -------------------------------------------------------------------------------- memory

CUSTOM = "custom"
PRESET_CHOICES = ("llama-2-7b", "llama-2-70b", "gpt-3-175b", "paper-22b", "paper-175b", "paper-530b",
                  "paper-1t", CUSTOM)
DEFAULT_PRESET = "llama-2-7b"
ON_OFF = ("on", "off")
MODEL_FIELDS = ("hidden", "heads", "layers", "vocab")          # what every preset sets
RUN_FIELDS = ("seq", "batch", "tp", "pp")                       # what the paper's Table 3 presets set too
CONFIG_ORDER = ("tp", "tp-sp", "tp-selective", "tp-sp-selective", "full", "full-sp")   # at the chosen t
TABLE2_ORDER = ("none",) + CONFIG_ORDER
LIMITS = {"seq": 10**6, "batch": 4096, "hidden": 10**6, "heads": 10**5, "layers": 10**4, "vocab": 10**7,
          "tp": 512, "pp": 512}
GIB80 = 80 * 2**30          # one 80 GB A100 / H100 holds about this much (the paper's Figure 1 line)


def _preset_values(preset: str) -> dict:
    """The fields a preset sets, as the controls hold them."""
    p = mem.PRESETS[preset]
    fields = MODEL_FIELDS + (RUN_FIELDS if preset.startswith("paper-") else ())
    return {k: p[k] for k in fields}


def memory_controls(values: dict) -> tuple[dict, dict]:
    """(validated controls, control_state): a preset's fields take its values and are disabled."""
    controls = SECTIONS["memory"].controls
    preset = next(ctl for ctl in controls if ctl.name == "preset").parse(values["preset"])
    set_by = _preset_values(preset) if preset != CUSTOM else {}
    c = parse_controls(controls, {**values, **set_by})     # what the reader typed under a preset is unused
    why = label("note.mem_set_by_preset", name=label(f"opt.preset.{preset.replace('-', '_')}"))
    state = {k: {"disabled": True, "value": str(v), "why": why} for k, v in set_by.items()}
    if c["tp"] == 1:     # Megatron turns sequence parallelism off without tensor parallelism
        c["sp"] = "off"
        state["sp"] = {"disabled": True, "value": "off", "why": label("note.mem_sp_needs_tp")}
    return c, state


def memory_result(c: dict) -> mem.MemoryResult:
    """The core's memory() for validated controls (presets give the layer's shape: GQA, MLP width)."""
    shape = {"kv_heads": None, "ffn": None, "arch": "gpt"}
    if c["preset"] != CUSTOM:
        p = mem.PRESETS[c["preset"]]
        shape = {"kv_heads": p["kv_heads"], "ffn": p["ffn"], "arch": p["arch"]}
    return mem.memory(seq=c["seq"], batch=c["batch"], hidden=c["hidden"], heads=c["heads"], tp=c["tp"],
                      sp=c["sp"] == "on", recompute=c["recompute"], layers=c["layers"], vocab=c["vocab"],
                      pp=c["pp"], optimizer=c["optimizer"], attention=c["attention"], **shape)


def configuration_totals(c: dict, r: mem.MemoryResult) -> dict[str, int | float]:
    """Per-rank total of each configuration at the chosen t (model states + activations): only the
    activations change between them (the same core, run with that configuration's sp/recompute)."""
    out = {}
    for name in CONFIG_ORDER:
        _, sp, rc = mem.CONFIGURATIONS[name]
        if sp and (c["tp"] == 1 or c["seq"] % c["tp"]):
            continue                      # equal to the plain rows at t = 1; impossible when t ∤ s
        out[name] = memory_result({**c, "sp": "on" if sp else "off", "recompute": rc}).per_rank_bytes
    return out


def layer_splits(r: mem.MemoryResult, names) -> dict[str, dict]:
    """One layer's activations on one rank at the chosen t, by what divides them, per configuration."""
    s, b, h, a, t = (r.inputs[k] for k in ("seq", "batch", "hidden", "heads", "tp"))
    out = {}
    for name in names:
        _, sp, rc = mem.CONFIGURATIONS[name]
        out[name] = mem.split_by_divisor(mem.layer_breakdown(s, b, h, a, t, sp, rc, r.inputs["attention"]), sp)
    return out


def layer_terms(name: str, attention: str) -> dict[str, str]:
    """The term of Table 2's formula each part of a configuration's layer is (flash: 4asb for 5as²b)."""
    rc = mem.CONFIGURATIONS[name][2]
    outside = "2sbh" if rc == "full" else "10sbh"
    scores = {"eager": "+5as²b/t", "flash": "+4asb/t"}[attention]
    inside = {"none": "24sbh/t" + scores, "selective": "24sbh/t", "full": ""}[rc]
    return {"tp": inside, "sp": outside + "/t", "neither": outside}


def _percent(x: float, decimals: int = 1) -> str:
    return fmt.num(x, decimals) + "\u00a0%"


def _bytes(x: int | float) -> str:
    """Exact byte count (rounded to a whole byte when the formula gives a fraction)."""
    return fmt.integer(round(x))


def _rank_table(c: dict, r: mem.MemoryResult) -> dict:
    n = r.parameters.per_rank
    bpp = r.bytes_per_parameter
    per = r.per_rank_bytes
    L = r.inputs["layers"]
    extra = sum(e.bytes for e in r.activation_extra)
    rows = [[label(f"label.mem_{k}"), f"{fmt.integer(n)} × {fmt.num(bpp[b])}\u00a0B", _bytes(per[k]), fmt.nbytes(per[k])]
            for k, b in (("parameters", "weights"), ("gradients", "gradients"), ("optimizer", "optimizer_per_rank"))]
    rows.append([label("label.mem_activations"),
                 label("label.mem_act_formula", layers=fmt.integer(L), per_layer=fmt.nbytes(r.activation_bytes_per_layer),
                       extra=fmt.nbytes(extra)),
                 _bytes(per["activations"]), fmt.nbytes(per["activations"])])
    foot = [[label("label.mem_total"), "", _bytes(per["total"]), fmt.nbytes(per["total"])]]
    return table("cap.mem_rank", ["col.mem_item", "col.mem_how", "col.mem_bytes", "col.mem_size"], rows, foot)


FORMULA = {
    "none": "sbh(34+5as/h)", "tp": "sbh(10+24/t+5as/(ht))", "tp-sp": "sbh(34/t+5as/(ht))",
    "tp-selective": "sbh(10+24/t)", "tp-sp-selective": "sbh(34/t)", "full": "2sbh", "full-sp": "2sbh/t",
}
# With flash attention the 5as²b term is never stored; its fp32 log-sum-exp (4asb) is (tpmath.memory).
FORMULA_FLASH = {**FORMULA, "none": "34sbh+4asb", "tp": "sbh(10+24/t)+4asb/t", "tp-sp": "34sbh/t+4asb/t"}


def _table2(c: dict, r: mem.MemoryResult, totals: dict) -> dict:
    t2 = r.table2
    L = r.inputs["layers"]
    base = t2["tp"]
    rows = []
    for name in TABLE2_ORDER:
        if name != "none" and name not in totals:
            continue
        total = fmt.nbytes(totals[name]["total"]) if name in totals else ""
        share = _percent(100 * t2[name] / base) if base else ""
        head = label(f"label.mem_cfg_{name.replace('-', '_')}")
        if name == r.configuration:
            head = label("label.mem_this", name=head)
        formula = (FORMULA_FLASH if c["attention"] == "flash" else FORMULA)[name]
        rows.append([head, formula, fmt.nbytes(t2[name]), fmt.nbytes(t2[name] * L), share, total])
    return table("cap.mem_table2", ["col.mem_config", "col.mem_formula", "col.mem_per_layer", "col.mem_layers",
                                    "col.mem_vs_tp", "col.mem_total"], rows)


def _breakdown(r: mem.MemoryResult) -> dict:
    rows = [[label(f"label.mem_item_{i.item.replace('-', '_')}"), label(f"label.mem_block_{i.block}"),
             label(f"label.mem_region_{i.region}"), fmt.nbytes(i.bytes)] for i in r.activation_breakdown]
    foot = [[label("label.mem_per_layer_total"), "", "", fmt.nbytes(r.activation_bytes_per_layer)]]
    return table("cap.mem_breakdown", ["col.mem_tensor", "col.mem_block", "col.mem_region", "col.mem_bytes_layer"],
                 rows, foot)


# The models §5 of the paper quotes numbers for: (a, s, h) -> (5as/h, % saved by selective recomputation).
PAPER_SECTION_5 = {(96, 2048, 12288): ("80", "70\u00a0%"), (128, 2048, 20480): ("64", "65\u00a0%")}


def _paper_table(c: dict, r: mem.MemoryResult) -> dict | None:
    """The paper's own numbers next to ours, where it gives them for this model and setting."""
    s, h, a = c["seq"], c["hidden"], c["heads"]
    # the paper's numbers are for its own (eager) attention: compare them with that
    t2 = r.table2 if c["attention"] == "eager" else memory_result({**c, "attention": "eager"}).table2
    rows = []
    quoted = PAPER_SECTION_5.get((a, s, h))
    if quoted:
        rows.append([label("label.mem_p_5ash"), label("label.mem_src_s5"), quoted[0], fmt.num(5 * a * s / h, 2)])
        rows.append([label("label.mem_p_selective_saves"), label("label.mem_src_s5"), quoted[1],
                     _percent(100 * (1 - t2["tp-sp-selective"] / t2["tp-sp"]))])
    if c["preset"].startswith("paper-"):
        base = t2["tp"]
        for key, name, paper in (("p_sp_half", "tp-sp", "label.mem_q_half"),
                                 ("p_sel_half", "tp-selective", "label.mem_q_half"),
                                 ("p_both", "tp-sp-selective", "label.mem_q_under_20"),
                                 ("p_full", "full", "label.mem_q_10")):
            rows.append([label(f"label.mem_{key}"), label("label.mem_src_f7"), label(paper),
                         _percent(100 * t2[name] / base)])
        if c["preset"] == "paper-22b":
            extra = mem.memory(preset="paper-22b", sp=True)
            share = sum(e.bytes for e in extra.activation_extra) / extra.activation_layers_bytes
            rows.append([label("label.mem_p_extra"), label("label.mem_src_s43"), label("label.mem_q_negligible"),
                         _percent(100 * share, 2)])
    if not rows:
        return None
    return table("cap.mem_paper", ["col.mem_statement", "col.mem_source", "col.mem_paper", "col.mem_ours"], rows)


def _flash_saving(c: dict, r: mem.MemoryResult) -> str:
    """Activations per rank that flash attention does not store, against eager attention."""
    eager = memory_result({**c, "attention": "eager"})
    return fmt.nbytes(eager.per_rank_bytes["activations"] - r.per_rank_bytes["activations"])


def render_memory(values: dict, lang: str) -> dict:
    """Memory per rank for one setting: the split into model states and activations, Table 2 at
    these sizes, the per-tensor breakdown of one layer and the paper's numbers where it has them."""
    c, state = memory_controls(values)
    try:
        r = memory_result(c)
    except TPMathError as err:
        # A refusal still says which fields the preset owns (their values, greyed): the page then
        # never shows a preset beside another preset's greyed values (issue 25 item 20).
        err.control_state = state
        raise
    totals = configuration_totals(c, r)
    tables = {"mem-rank": _rank_table(c, r), "mem-table2": _table2(c, r, totals), "mem-breakdown": _breakdown(r)}
    paper = _paper_table(c, r)
    if paper is not None:
        tables["mem-paper"] = paper
    notes = {}
    if c["preset"] != CUSTOM:
        notes["mem-preset"] = label("note.mem_preset_" + ("paper" if c["preset"].startswith("paper-") else "model"),
                                    name=label(f"opt.preset.{c['preset'].replace('-', '_')}"))
    else:
        notes["mem-custom"] = label("note.mem_custom")
    if c["attention"] == "flash" and c["recompute"] == "none":
        notes["mem-flash"] = label("note.mem_flash", saved=_flash_saving(c, r))
    elif c["attention"] == "flash":      # the attention core is recomputed anyway: flash stores nothing more
        notes["mem-flash"] = label("note.mem_flash_recomputed", recompute=label(f"opt.recompute.{c['recompute']}"))
    for d in r.differs_from_formula:
        notes[f"mem-differs-{d}"] = label(f"note.mem_differs_{d.replace('-', '_')}")
    if c["tp"] > 1 and c["seq"] % c["tp"]:
        notes["mem-sp-split"] = label("note.mem_sp_split", tp=fmt.integer(c["tp"]), seq=fmt.integer(c["seq"]))
    if c["pp"] > 1:
        notes["mem-pp"] = label("note.mem_pp", pp=fmt.integer(c["pp"]), layers=fmt.integer(c["layers"]))
    per = r.per_rank_bytes
    return {
        "controls": {k: str(v) for k, v in c.items()},
        "control_state": state,
        "tables": tables,
        "figures": {"memory": figure_memory(r, totals, GIB80),
                    "memory-layer": figure_memory_layer(r, layer_splits(r, totals),
                                                        {n: layer_terms(n, c["attention"]) for n in totals})},
        "values": {
            "mem-total": fmt.nbytes(per["total"]),
            "mem-activations": fmt.nbytes(per["activations"]),
            "mem-per-layer": fmt.nbytes(r.activation_bytes_per_layer),
            "mem-params": fmt.integer(r.parameters.per_rank),
        },
        "notes": notes,
    }


# -------------------------------------------------------------------------------- dropout

DROPOUT_HIDDEN = 4           # columns of the drawn activation: enough to see a pattern
DROPOUT_SEED = 0
DROPOUT_SCHEMES = {"replicated": ("same", False), "sharded-same": ("same", True),
                   "sharded-offset": ("rank-offset", True)}   # case -> (core scheme, token shards)


def dropout_masks(c: dict) -> dict[str, list[np.ndarray]]:
    """Each case's keep-mask per rank, from the core's generator."""
    return {case: core.rank_dropout_masks(c["tp"], c["seq"], DROPOUT_HIDDEN, c["dropout"], DROPOUT_SEED,
                                          *DROPOUT_SCHEMES[case]) for case in DROPOUT_CASES}


def _dropout_table(c: dict, masks: dict) -> dict:
    """Each rank's key under either scheme and how many entries it drops on its token shard."""
    rows = [[tree.rank_tag(r), fmt.integer(DROPOUT_SEED),
             fmt.integer(DROPOUT_SEED + core.MP_SEED_OFFSET + r),
             fmt.integer(int((~masks["sharded-same"][r]).sum())), fmt.integer(int((~masks["sharded-offset"][r]).sum()))]
            for r in range(c["tp"])]
    return table("cap.dr_masks",
                 ["col.rank", "col.dr_key_same", "col.dr_key_offset", "col.dr_dropped_same", "col.dr_dropped_offset"],
                 rows)


def render_dropout(values: dict, lang: str) -> dict:
    """Dropout masks per rank: a replicated tensor and token shards under one shared seed, and
    token shards under Megatron's per-rank seeds."""
    c = parse_controls(SECTIONS["dropout"].controls, values)
    c["tp"], c["seq"] = int(c["tp"]), int(c["seq"])
    masks = dropout_masks(c)
    return {"controls": {k: str(v) for k, v in c.items()}, "tables": {"dr-masks": _dropout_table(c, masks)},
            "figures": {"dropout": figure_dropout(masks, c["tp"], c["seq"])}, "values": {}, "notes": {},
            "control_state": {}}


def _memory_defaults() -> dict:
    p = mem.PRESETS[DEFAULT_PRESET]
    return {"seq": p["seq"], **{k: p[k] for k in MODEL_FIELDS}}


_MD = _memory_defaults()


def _number(name: str, default: int) -> Control:
    return Control(name, "number", default, min=1, max=LIMITS[name], step=1, label=f"ctl.mem_{name}", slider="log")


SECTIONS = {
    "sp-layer": Section(
        name="sp-layer",
        controls=(
            Control("tp", "select", "2", options=tuple(str(t) for t in TP_OPTIONS), label="ctl.sp_tp", slider=True),
            Control("seq", "select", "4", options=tuple(str(s) for s in SEQ_OPTIONS), label="ctl.sp_seq", slider=True),
            Control("mistake", "select", "none", options=core.MISTAKES, label="ctl.sp_mistake"),
            Control("dropout", "select", "0", options=DROPOUT_OPTIONS, label="ctl.sp_dropout", slider=True),
            Control("step", "select", "gather", options=STEP_NAMES, label="ctl.sp_step", slider=True),
            Control("backward_input", "select", "regather", options=core.BACKWARD_INPUTS, label="ctl.sp_backward_input"),
        ),
        render=render_sp_layer,
        tables=("sp-ranks", "sp-comm", "sp-ln", "sp-check"),     # + "sp-masks" when dropout is on
        values=("sp-loss", "sp-reference-loss", "sp-max-err", "sp-sent", "tp-sent"),
        real=_real,
    ),
    "dropout": Section(
        name="dropout",
        controls=(
            Control("tp", "select", "2", options=("2", "4"), label="ctl.sp_tp", slider=True),
            Control("seq", "select", "8", options=("4", "8"), label="ctl.sp_seq", slider=True),
            Control("dropout", "select", "0.25", options=DROPOUT_OPTIONS[1:], label="ctl.sp_dropout", slider=True),
        ),
        render=render_dropout,
        tables=("dr-masks",),
    ),
    "memory": Section(
        name="memory",
        controls=(
            Control("preset", "select", DEFAULT_PRESET, options=PRESET_CHOICES, label="ctl.mem_preset"),
            _number("seq", _MD["seq"]), _number("batch", 1), _number("hidden", _MD["hidden"]),
            _number("heads", _MD["heads"]), _number("layers", _MD["layers"]), _number("vocab", _MD["vocab"]),
            _number("tp", 8), _number("pp", 1),
            Control("sp", "select", "off", options=ON_OFF, label="ctl.mem_sp"),
            Control("recompute", "select", "none", options=mem.RECOMPUTE, label="ctl.mem_recompute"),
            Control("attention", "select", "eager", options=mem.ATTENTION, label="ctl.mem_attention"),
            Control("optimizer", "select", "megatron-bf16", options=tuple(mem.OPTIMIZERS), label="ctl.mem_optimizer"),
        ),
        render=render_memory,
        tables=("mem-rank", "mem-table2", "mem-breakdown"),      # + "mem-paper" where the paper has numbers
        values=("mem-total", "mem-activations", "mem-per-layer", "mem-params"),
    ),
}
