"""Views of page 3 (the transformer layer): sections ``attention``, ``layer`` and ``qkv-layout``.

Letters as in :mod:`tpmath.attention` (B S D H K E tp; H_r query heads and K_r KV heads per rank)
and :mod:`tpmath.layer` (F, the MLP width).  Every number comes from the core (run_attention,
run_layer, fused_qkv_split, kv_strategy_cost) through :mod:`tpmath.fmt`; matrices are grid
cells tinted by the rank that holds them (grey: every rank holds the same).

Tables (``data-table``) and values (``data-value``), documented in ARCHITECTURE.md:

``attention``   att-inputs att-heads att-shards att-probs att-check att-y att-comm att-kv-cost;
                loss reference-loss max-abs-err softmax-scale kv-replicas kv-grad-spread
``layer``       layer-params layer-replicated layer-out layer-comm;
                loss reference-loss max-abs-err layer-allreduces
``qkv-layout``  qkv-ranks; qkv-columns qkv-per-rank

A mistake that changes nothing at the chosen sizes (``attention.mistake_needs``) is offered
disabled with its reason (``control_state["mistake"]["options"]``); if it is the selected one,
the section shows the correct computation, sets the control back to ``none`` and says why.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import attention as att
from .. import layer as lay
from ..collectives import REGISTRY
from .. import fmt
from . import Control, Section, parse_controls
from .fig_attention import figure_attention, figure_attention_grads, figure_layer, figure_qkv
from .cells import label, rank, table
from .tree import grid, rank_tag

TP_OPTIONS = ("1", "2", "4", "8")
HEAD_OPTIONS = ("1", "2", "4", "8")
SEQ_OPTIONS = ("2", "3", "4", "5", "6")
HIDDEN_OPTIONS = ("8", "16")
SWITCH = ("off", "on")
LAYER_TP_OPTIONS = ("1", "2", "4")
LAYER_HEAD_OPTIONS = ("2", "4", "8")
PASSES = ("forward", "backward")
HEAD_DIM_OPTIONS = ("1", "2", "4")
BATCH = 1                 # one sequence: a token is a row of every matrix shown
LAYER_SEQ, LAYER_HIDDEN, LAYER_FFN = 4, 8, 32   # F = 4·D, the core's default

def _k(name: str) -> str:
    """i18n key part of a name with hyphens (``kv-grad-not-summed`` -> ``kv_grad_not_summed``)."""
    return name.replace("-", "_")


def _shape(shape) -> str:
    return "×".join(fmt.integer(s) for s in shape)


def _ids(ids) -> str:
    return ", ".join(fmt.integer(i) for i in ids)


def _ranks(group) -> str:
    return ", ".join(rank(r) for r in group)


def _rows2(a: np.ndarray) -> np.ndarray:
    """(B, S, n) with B = 1 as the (S, n) matrix the tables show (a token per row)."""
    a = np.asarray(a)
    return a.reshape(-1, a.shape[-1]) if a.ndim > 2 else a


# ---------------------------------------------------------------------------------- attention

def attention_controls(values: dict) -> dict:
    """The section's controls validated (select values, head split) into core arguments."""
    c = parse_controls(SECTIONS["attention"].controls, values)
    c["causal"] = c["causal"] == "on"
    att.validate_config(c["tp"], c["heads"], c["kv_heads"], c["seq"], BATCH, c["hidden"], c["causal"])
    return c


def mistake_options(c: dict) -> dict:
    """{mistake: reason cell} for every mistake that changes nothing at these sizes."""
    off = {}
    for m in att.MISTAKES[1:]:
        cfg = att.Config(c["tp"], c["heads"], c["kv_heads"], c["seq"], BATCH, c["hidden"], c["causal"], m)
        if att.mistake_needs(cfg) is not None:
            off[m] = label(f"note.att_needs_{_k(m)}")
    return off


def _run(c: dict, mistake: str | None = None) -> att.AttentionResult:
    return att.cached_run(c["tp"], c["heads"], c["kv_heads"], c["seq"], BATCH, c["hidden"], c["seed"], c["causal"],
                          c["mistake"] if mistake is None else mistake)


def _kv_cell(cfg: att.Config, rk: att.AttentionRank, groups: list) -> Any:
    """A rank's KV heads, and where they are also held (replicas) or what it should hold."""
    held = rk.kv_heads
    needed = sorted({att.kv_head_of(h, cfg.heads, cfg.kv_heads) for h in rk.q_heads})
    if held != needed:
        return label("label.att_kv_wrong", held=_ids(held), needed=_ids(needed))
    if cfg.kv_heads < cfg.tp:
        grp = next(g for g in groups if rk.rank in g)
        return label("label.att_kv_replicated", heads=_ids(held), ranks=_ranks(grp))
    return _ids(held)


def _heads_table(res: att.AttentionResult, cfg: att.Config) -> dict:
    groups = att.kv_groups([rk.kv_heads for rk in res.ranks])
    rows = []
    for rk in res.ranks:
        s = rk.shapes
        shards = " · ".join(f"{k} {_shape(s[k])}" for k in att.WEIGHTS)
        local = " · ".join(f"{k} {_shape(s[key])}" for k, key in
                           (("q", "Q"), ("k", "K"), ("v", "V"), ("P", "probs"), ("Yᵣ", "Y_partial")))
        rows.append([rank_tag(rk.rank), _ids(rk.q_heads), _kv_cell(cfg, rk, groups), shards, local])
    return table("cap.att_heads", ["col.rank", "col.att_q_heads", "col.att_kv_heads", "col.att_shards",
                                   "col.att_local"], rows)


def _shards_table(res: att.AttentionResult) -> dict:
    rows = [[rank_tag(rk.rank)] + [grid(getattr(rk, w), rk.rank) for w in att.WEIGHTS] for rk in res.ranks]
    return table("cap.att_shards", ["col.rank", "col.att_w_q", "col.att_w_k", "col.att_w_v", "col.att_w_o"], rows)


def _inputs_table(res: att.AttentionResult) -> dict:
    inp = res.inputs
    rows = [["X", grid(_rows2(inp["X"])), _shape(inp["X"].shape), label("label.att_x_held")],
            ["G", grid(_rows2(inp["G"])), _shape(inp["G"].shape), label("label.att_g_held")]]
    return table("cap.att_inputs", ["col.att_tensor", "col.att_value", "col.att_shape", "col.att_held"], rows)


def _probs_table(res: att.AttentionResult, one: att.AttentionResult, cfg: att.Config) -> dict:
    """Each rank's local heads: the KV head it read, P, and P's distance from the unsharded P."""
    ref = one.ranks[0].probs                                     # (B, H, S, S) every head, one device
    rows = []
    for rk in res.ranks:
        for j, h in enumerate(rk.q_heads):
            read = rk.kv_heads[j * len(rk.kv_heads) // len(rk.q_heads)]
            P = rk.probs[:, j]                                   # (B, S, S)
            rows.append([rank_tag(rk.rank), fmt.integer(h), fmt.integer(read),
                         fmt.integer(att.kv_head_of(h, cfg.heads, cfg.kv_heads)),
                         grid(_rows2(P), rk.rank, scale=1.0), fmt.err(np.max(np.abs(P - ref[:, h])))])
    return table("cap.att_probs", ["col.rank", "col.att_head", "col.att_read", "col.att_should_read",
                                   "col.att_p", "col.att_p_err"], rows)


def _how(key: str, cfg: att.Config) -> dict:
    """How the ranks' parts of a result make the whole (a translated phrase)."""
    if key in ("G_W_k", "G_W_v"):
        return label("label.att_how_replicas" if cfg.kv_heads < cfg.tp else "label.att_how_cols")
    return label({"Y": "label.att_how_g", "loss": "label.att_how_loss", "G_X": "label.att_how_f",
                  "G_W_q": "label.att_how_cols", "G_W_o": "label.att_how_rows"}[key])


def _check_rows(res: att.AttentionResult | lay.LayerResult, keys, how) -> list:
    rows = []
    for key in keys:
        err, tol = res.max_abs_err[key], res.tolerances[key]
        rows.append([key, _shape(np.shape(getattr(res.reference, key))) or "—", how(key), _measured(res, key),
                     fmt.err(tol), label("label.att_ok" if err <= tol else "label.att_bad")])
    return rows


def _check_table(res: att.AttentionResult, cfg: att.Config) -> dict:
    return table("cap.att_check", ["col.att_result", "col.att_shape", "col.att_how", "col.max_abs_err",
                                   "col.tolerance", "col.att_verdict"],
                 _check_rows(res, att.RESULT_KEYS, lambda k: _how(k, cfg)))


def _y_table(res: att.AttentionResult | lay.LayerResult, caption: str) -> dict:
    """Y and G_X as the ranks hold them (after the collectives) and the unsharded reference, one
    matrix per row (a phone column holds one 4×8 grid, not two side by side)."""
    sh, ref = res.sharded, res.reference
    rows = []
    for key in ("Y", "G_X"):
        err = _measured(res, key)
        rows += [[key, label("label.att_tp_result"), grid(_rows2(getattr(sh, key))), err],
                 [key, label("label.reference"), grid(_rows2(getattr(ref, key))), "—"]]
    return table(caption, ["col.att_result", "col.att_on", "col.att_value", "col.max_abs_err"], rows)


def _measured(res: att.AttentionResult | lay.LayerResult, key: str) -> str:
    """The measured error of one result, max |TP − unsharded|, by the site's one rule (fmt.err).
    The core computes in a fixed order (kernels.*_fixed), so these digits are the same at build
    time, in the browser and on the command line; the tolerance is a column of its own."""
    return fmt.err(res.max_abs_err[key])


def worst_error(res: att.AttentionResult | lay.LayerResult) -> str:
    """The largest measured error of any result (the tolerances: the check table's column)."""
    return fmt.err(max(res.max_abs_err.values()))


def _operator(op: str) -> Any:
    return label("label.att_replica_group") if op == "kv-replicas" else op


def comm_table(comm: list[att.AttentionComm], caption: str) -> dict:
    """The collectives, one row each: phase, operator, tensor, elements and groups."""
    rows = [[label(f"label.att_{c.phase}"), REGISTRY[c.collective].nccl, _operator(c.operator), c.tensor,
             fmt.integer(c.elements), " | ".join(_ranks(g) for g in c.groups)] for c in comm]
    if not rows:
        rows = [[label("label.att_none"), "—", "—", "—", "0", "—"]]
    return table(caption, ["col.att_phase", "col.att_collective", "col.att_operator", "col.att_tensor",
                           "col.att_elements", "col.att_groups"], rows)


def _kv_cost_table(cfg: att.Config) -> dict:
    cost = att.kv_strategy_cost(cfg)
    rep, meg = cost["replicated"], cost["megatron"]

    def count(x):
        return fmt.integer(x) if float(x).is_integer() else fmt.num(x, 2)

    rows = [[label(f"label.att_cost_{k}"), count(rep[k]), count(meg[k])]
            for k in ("qkv_weight_elements", "kv_weight_elements", "qkv_flops", "qkv_activation_elements",
                      "forward_allgather_elements", "backward_reducescatter_elements",
                      "kv_grad_allreduce_elements")]
    return table("cap.att_kv_cost", ["col.att_per_rank", "col.att_replicated", "col.att_megatron"], rows)


def _notes(cfg: att.Config, res: att.AttentionResult, reset: str | None) -> dict:
    n = fmt.integer
    if cfg.kv_heads >= cfg.tp:
        split = label("note.att_split_even", tp=n(cfg.tp), h=n(cfg.heads), k=n(cfg.kv_heads), hr=n(cfg.q_per_rank),
                      kr=n(cfg.kv_per_rank), group=n(cfg.heads // cfg.kv_heads))
    else:
        split = label("note.att_split_replicated", tp=n(cfg.tp), h=n(cfg.heads), k=n(cfg.kv_heads),
                      hr=n(cfg.q_per_rank), rep=n(cfg.replicas))
    out = {"att-split": split,
           "att-mistake": label(f"note.att_mistake_{_k(cfg.mistake)}", err=worst_error(res),
                                tp=n(cfg.tp), hr=n(cfg.q_per_rank), spread=fmt.err(res.replica_spread["G_W_k"]))}
    # always present (empty when nothing was reset): the page only rewrites the notes a result names
    out["att-reset"] = "" if reset is None else label("note.att_reset", mistake=label(f"opt.mistake.{_k(reset)}"),
                                                      why=label(f"note.att_needs_{_k(reset)}"))
    return out


def render_attention(controls: dict, lang: str) -> dict:
    c = attention_controls(controls)
    off = mistake_options(c)
    reset = c["mistake"] if c["mistake"] in off else None
    if reset is not None:
        c["mistake"] = "none"
    res = _run(c)
    one = att.cached_run(1, c["heads"], c["kv_heads"], c["seq"], BATCH, c["hidden"], c["seed"], c["causal"])
    cfg = att.validate_config(c["tp"], c["heads"], c["kv_heads"], c["seq"], BATCH, c["hidden"], c["causal"],
                              c["mistake"])
    state = {"mistake": {"disabled": False, "options": off}}
    if reset is not None:
        state["mistake"]["value"] = "none"
    shown = {"tp": str(c["tp"]), "heads": str(c["heads"]), "kv_heads": str(c["kv_heads"]), "seq": str(c["seq"]),
             "hidden": str(c["hidden"]), "causal": "on" if c["causal"] else "off", "mistake": c["mistake"],
             "seed": str(c["seed"])}
    return {
        "controls": shown,
        "control_state": state,
        "tables": {"att-inputs": _inputs_table(res), "att-heads": _heads_table(res, cfg),
                   "att-shards": _shards_table(res), "att-probs": _probs_table(res, one, cfg),
                   "att-check": _check_table(res, cfg), "att-y": _y_table(res, "cap.att_y"),
                   "att-comm": comm_table(res.comm, "cap.att_comm"), "att-kv-cost": _kv_cost_table(cfg)},
        "figures": {"attention": figure_attention(res, one, cfg),
                    "attention-grads": figure_attention_grads(res, cfg)},
        "values": {"loss": fmt.num(res.sharded.loss), "reference-loss": fmt.num(res.reference.loss),
                   "max-abs-err": worst_error(res),
                   "softmax-scale": fmt.num(res.config["scale"]),
                   "kv-replicas": fmt.integer(cfg.replicas),
                   "kv-grad-spread": fmt.err(max(res.replica_spread["G_W_k"], res.replica_spread["G_W_v"]))},
        "notes": _notes(cfg, res, reset),
    }


def _attention_real(c: dict) -> list:
    given = {"tp": c["tp"], "heads": c["heads"], "kv_heads": c["kv_heads"], "seq": c["seq"], "hidden": c["hidden"],
             "seed": c["seed"], "causal": c["causal"] == "on", "mistake": c["mistake"]}
    return [("attention", given)]


# -------------------------------------------------------------------------------------- layer

def layer_controls(values: dict) -> dict:
    c = parse_controls(SECTIONS["layer"].controls, values)
    c["causal"] = c["causal"] == "on"
    lay.validate_layer(c["tp"], c["heads"], c["kv_heads"], LAYER_SEQ, BATCH, LAYER_HIDDEN, LAYER_FFN, c["causal"])
    return c


def run_layer_view(c: dict) -> lay.LayerResult:
    """The layer at the page's fixed sizes (S = 4, D = 8, F = 32, seed 0), memoised by the core."""
    return lay.cached_run(c["tp"], c["heads"], c["kv_heads"], LAYER_SEQ, BATCH, LAYER_HIDDEN, LAYER_FFN, 0,
                          c["causal"])


# parameter -> how TP holds it: "col" split by output columns (heads / F), "row" by input rows,
# "kv" KV columns (split or replicated), "rep" whole on every rank
HOLD = {"gamma1": "rep", "beta1": "rep", "W_q": "col", "W_k": "kv", "W_v": "kv", "W_o": "row", "b_o": "rep",
        "gamma2": "rep", "beta2": "rep", "W1": "col", "b1": "col", "W2": "row", "b2": "rep"}
SYMBOL = {"gamma1": "γ₁", "beta1": "β₁", "W_q": "W_q", "W_k": "W_k", "W_v": "W_v", "W_o": "W_o", "b_o": "b_o",
          "gamma2": "γ₂", "beta2": "β₂", "W1": "W₁", "b1": "b₁", "W2": "W₂", "b2": "b₂"}


def _hold(p: str, cfg: att.Config) -> dict:
    how = HOLD[p]
    if how == "kv":
        how = "rep_kv" if cfg.kv_heads < cfg.tp else "col"
    return label(f"label.layer_hold_{how}")


def _params_table(res: lay.LayerResult, cfg: att.Config) -> dict:
    r0, rows = res.ranks[0], []
    kv_of_rank = [rk.kv_heads for rk in res.ranks]
    for p in lay.PARAMS:
        key = "G_" + p
        spread = res.replica_spread.get(p)
        if HOLD[p] == "kv" and cfg.kv_heads < cfg.tp:
            spread = att.kv_replica_spread([getattr(rk, key) for rk in res.ranks], kv_of_rank)
        per_rank = r0.shapes[p] if p in r0.shapes else r0.shapes[key]
        rows.append([SYMBOL[p], _shape(res.inputs[p].shape), _hold(p, cfg), _shape(per_rank),
                     _measured(res, key), fmt.err(res.tolerances[key]),
                     "—" if spread is None else fmt.err(spread)])
    return table("cap.layer_params", ["col.layer_param", "col.att_shape", "col.layer_held", "col.layer_per_rank",
                                      "col.layer_grad_err", "col.tolerance", "col.layer_spread"], rows)


def _replicated_table(res: lay.LayerResult) -> dict:
    """Rank 0's gradient of each replicated parameter above the reference's, one vector per row
    (two (D,) grids side by side do not fit a page column)."""
    rows = []
    for p in lay.REPLICATED:
        rows += [[SYMBOL[p], label("label.att_tp_result"), grid(getattr(res.ranks[0], "G_" + p)),
                  fmt.err(res.replica_spread[p])],
                 [SYMBOL[p], label("label.reference"), grid(getattr(res.reference, "G_" + p)), "—"]]
    return table("cap.layer_replicated", ["col.layer_param", "col.att_on", "col.layer_grad", "col.layer_spread"],
                 rows)


def render_layer(controls: dict, lang: str) -> dict:
    c = layer_controls(controls)
    res = run_layer_view(c)
    cfg = att.validate_config(c["tp"], c["heads"], c["kv_heads"], LAYER_SEQ, BATCH, LAYER_HIDDEN, c["causal"])
    fwd = sum(1 for x in res.comm if x.phase == "forward")
    bwd = sum(1 for x in res.comm if x.phase == "backward" and x.operator != "kv-replicas")
    shown = {"tp": str(c["tp"]), "heads": str(c["heads"]), "kv_heads": str(c["kv_heads"]),
             "causal": "on" if c["causal"] else "off", "pass": c["pass"]}
    return {
        "controls": shown,
        "tables": {"layer-params": _params_table(res, cfg), "layer-replicated": _replicated_table(res),
                   "layer-out": _y_table(res, "cap.layer_out"), "layer-comm": comm_table(res.comm, "cap.layer_comm")},
        "figures": {"layer": figure_layer(res, cfg, c["pass"])},
        "values": {"loss": fmt.num(res.sharded.loss), "reference-loss": fmt.num(res.reference.loss),
                   "max-abs-err": worst_error(res),
                   "layer-allreduces": label("label.layer_allreduces", fwd=fmt.integer(fwd), bwd=fmt.integer(bwd))},
        "notes": {"layer-pass": label(f"note.layer_{c['pass']}", tp=fmt.integer(c["tp"]))},
    }


def _layer_real(c: dict) -> list:
    return [("layer", {"tp": c["tp"], "heads": c["heads"], "kv_heads": c["kv_heads"], "seq": LAYER_SEQ,
                       "hidden": LAYER_HIDDEN, "causal": c["causal"] == "on", "stage": c["pass"]})]


# --------------------------------------------------------------------------------- qkv-layout

def qkv_controls(values: dict) -> dict:
    c = parse_controls(SECTIONS["qkv-layout"].controls, values)
    split = {lay_: att.fused_qkv_split(c["tp"], c["heads"], c["kv_heads"], c["head_dim"], lay_)
             for lay_ in att.QKV_LAYOUTS}
    return {**c, "split": split}


def _pieces(pieces: list, E: int) -> str:
    """What a rank's column block holds: q0 k1 … with a fraction where it cuts a head."""
    out = []
    for p in pieces:
        a, b = p["cols"]
        name = f"{p['part']}{fmt.integer(p['head'])}"
        out.append(name if (a, b) == (0, E) else f"{name}[{fmt.integer(a)}:{fmt.integer(b)}]")
    return " ".join(out)


def _needs(cfg: att.Config, r: int) -> str:
    q, kv = att.rank_heads(cfg, r)
    return " ".join([f"q{fmt.integer(h)}" for h in q] + [f"{x}{fmt.integer(k)}" for k in kv for x in "kv"])


def _qkv_table(c: dict, cfg: att.Config) -> dict:
    E = c["head_dim"]
    meg, cat = c["split"]["megatron"], c["split"]["concatenated"]
    rows = []
    for r in range(c["tp"]):
        row = [rank_tag(r), _needs(cfg, r)]
        for s in (meg, cat):
            if s["ranks"] is None:
                row += ["—", label("label.qkv_uneven")]
                continue
            rk = s["ranks"][r]
            w = s["columns_per_rank"]
            row += [f"[{fmt.integer(r * w)}, {fmt.integer((r + 1) * w)}) " + _pieces(rk["pieces"], E),
                    label("label.qkv_usable" if rk["usable"] else "label.qkv_not_usable")]
        rows.append(row)
    return table("cap.qkv_ranks", ["col.rank", "col.qkv_needs", "col.qkv_megatron", "col.qkv_megatron_ok",
                                   "col.qkv_concat", "col.qkv_concat_ok"], rows)


def render_qkv(controls: dict, lang: str) -> dict:
    c = qkv_controls(controls)
    cfg = att.validate_config(c["tp"], c["heads"], c["kv_heads"], hidden=c["heads"] * c["head_dim"])
    meg = c["split"]["megatron"]
    per = meg["columns_per_rank"]
    shown = {"tp": str(c["tp"]), "heads": str(c["heads"]), "kv_heads": str(c["kv_heads"]),
             "head_dim": str(c["head_dim"])}
    note = "note.qkv_uneven" if meg["ranks"] is None else (
        "note.qkv_even" if cfg.kv_heads >= cfg.tp else "note.qkv_replicated")
    return {
        "controls": shown,
        "tables": {"qkv-ranks": _qkv_table(c, cfg)},
        "figures": {"qkv-layout": figure_qkv(c["split"], cfg, c["head_dim"])},
        "values": {"qkv-columns": fmt.integer(meg["columns"]),
                   "qkv-per-rank": fmt.integer(per) if float(per).is_integer() else fmt.num(per, 2)},
        "notes": {"qkv": label(note, tp=fmt.integer(cfg.tp), k=fmt.integer(cfg.kv_heads))},
    }


def _qkv_real(c: dict) -> list:
    return [("attention", {"tp": c["tp"], "heads": c["heads"], "kv_heads": c["kv_heads"],
                           "hidden": int(c["heads"]) * int(c["head_dim"]), "stage": "forward"})]


# ------------------------------------------------------------------------------------ sections

def _sel(name: str, default: str, options: tuple, lab: str) -> Control:
    return Control(name, "select", default, options=options, label=lab)


def _heads(tp_options: tuple, head_options: tuple) -> tuple:
    """The controls every section of the page starts with: tp, query heads, KV heads."""
    return (_sel("tp", "2", tp_options, "ctl.tp"),
            _sel("heads", "4", head_options, "ctl.att_heads"),
            _sel("kv_heads", "2", HEAD_OPTIONS, "ctl.att_kv_heads"))


SECTIONS = {
    "attention": Section(
        name="attention",
        controls=(
            *_heads(TP_OPTIONS, HEAD_OPTIONS),
            _sel("causal", "on", SWITCH, "ctl.att_causal"),
            _sel("mistake", "none", att.MISTAKES, "ctl.att_mistake"),
            _sel("seq", "4", SEQ_OPTIONS, "ctl.att_seq"),
            _sel("hidden", "8", HIDDEN_OPTIONS, "ctl.att_hidden"),
            Control("seed", "number", 0, min=0, max=att.MAX_SEED, step=1, label="ctl.att_seed"),
        ),
        render=render_attention,
        tables=("att-inputs", "att-heads", "att-shards", "att-probs", "att-y", "att-check", "att-comm",
                "att-kv-cost"),
        values=("loss", "reference-loss", "max-abs-err", "softmax-scale", "kv-replicas", "kv-grad-spread"),
        real=_attention_real,
    ),
    "layer": Section(
        name="layer",
        controls=(
            *_heads(LAYER_TP_OPTIONS, LAYER_HEAD_OPTIONS),
            _sel("causal", "on", SWITCH, "ctl.att_causal"),
            _sel("pass", "forward", PASSES, "ctl.layer_pass"),
        ),
        render=render_layer,
        tables=("layer-params", "layer-replicated", "layer-out", "layer-comm"),
        values=("loss", "reference-loss", "max-abs-err", "layer-allreduces"),
        real=_layer_real,
    ),
    "qkv-layout": Section(
        name="qkv-layout",
        controls=(
            *_heads(TP_OPTIONS, HEAD_OPTIONS),
            _sel("head_dim", "2", HEAD_DIM_OPTIONS, "ctl.qkv_head_dim"),
        ),
        render=render_qkv,
        tables=("qkv-ranks",),
        values=("qkv-columns", "qkv-per-rank"),
        real=_qkv_real,
    ),
}
