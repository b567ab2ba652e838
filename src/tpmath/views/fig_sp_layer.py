"""Figures of page 4: the TP + SP block as a pipeline, the γ/β gradients, the memory bars.

``sp-layer`` draws one column per rank and lets time run down the page: a sequence-parallel
region (each rank on its own tokens), the collective that converts it (a band across every
column), the tensor-parallel region (all tokens, the rank's hidden columns), the collective back,
and the sequence-parallel region again.  Tensors are token maps: one row per token, one cell
per entry, no numbers (the tables have them); a row is tinted by the rank that owns the token,
so the AllGather shows as rows of every tint arriving in each column, and a wrong gather shows
as rows in the wrong order (the token index is written next to each row).  Dropped entries are
crossed; under each masked block a ✓ or ✗ says whether the mask is this rank's block of the
one-device mask.  The γ/β gradients have their own figure.

``sp-ln`` has the numbers of γ's and β's gradients: each rank's partial sums, the AllReduce and
the result (or, under the mistake, the replicas that now differ); on a phone a lane's grids wrap
under its badge.  ``memory`` stacks the model
states and the activations of one rank for each configuration of Table 2 at the chosen t;
``memory-layer`` one layer's activations by what divides them.  ``dropout`` draws each rank's
dropout mask (dropped entries crossed) for a replicated tensor and for token shards, under one
seed for all ranks and under Megatron's per-rank seeds.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import sp_layer as core
from .. import fmt
from ..memory import MemoryResult
from .draw import (CELL_H, LABEL_H, NARROW_W, PAD as FIG_PAD, Panel, Row, Seg, arrow_panel, badge_panel, bar,
                   bar_rows, centred, col_badges, col_groups, col_panels, collective_flow, column, figure_at, flowed,
                   key, label, lane_badge, matrix_panel, note_panel, op_box, region, snake, span, pass_strips, text_w,
                   token_panel, words)

CELL = 12.0            # one entry of a token map
SUB_W = 52.0           # room a translated sub-caption needs (about 8 Latin letters or 4 Chinese characters)
GAP = 10.0             # between two ranks' columns
COL_MAX = 300.0        # the widest rank column
STRIP_BESIDE = 560.0   # a drawing this wide has the step's name beside the steps, a narrower one under them
NOTE_W = NARROW_W - 2 * FIG_PAD    # a note that must fit a phone drawing
_WIDE_CHAR = re.compile(r"[\u2e80-\u9fff\uff00-\uffef]")


def _text_w(cell: Any) -> float:
    """Estimated width of a caption at 12 px: translated cells get :data:`SUB_W`."""
    if not isinstance(cell, str):
        return SUB_W
    # fsum, not sum: Python 3.12 (Pyodide) adds floats with compensation and 3.11 does not, and the
    # drawing must be the same to the last coordinate in both
    return math.fsum(12.0 if _WIDE_CHAR.match(ch) else 6.8 for ch in cell)


@dataclass
class Block:
    """A tensor of one rank drawn as a token map."""

    part: str                     # data-part (tests find blocks by it)
    caption: str                  # a symbol: Xᵣ, A, Hᵣ …
    rows: list                    # rank tint of each row (None: replicated)
    cols: int
    owner: int | None             # the rank holding it (its frame)
    shade: int = 3                # v0…v4: 1 for a partial sum
    dropped: np.ndarray | None = None     # (rows, cols) True where dropout zeroed the entry
    labels: list | None = None    # token index of each row (gathered tensors)
    sub: Any = None               # a line under the block

    def panel(self) -> Panel:
        room = max(_text_w(self.caption), _text_w(self.sub) if self.sub is not None else 0.0)
        return token_panel(self.caption, self.rows, self.cols, self.owner, self.shade, self.labels, self.dropped,
                           self.sub, self.part, CELL, room)


# ------------------------------------------------------------------------ the pipeline

def _rows2(a: np.ndarray) -> np.ndarray:
    """(B = 1, rows, cols) → (rows, cols)."""
    a = np.asarray(a)
    return a.reshape(-1, a.shape[-1])


def gathered_sources(res: core.SpLayerResult, wrong: bool) -> tuple[np.ndarray, np.ndarray]:
    """(source rank, token index) of each row of the forward AllGather's result, found by running
    the core's own gather on shards that hold their rank / their token numbers."""
    T, S, D = res.tp, res.seq, res.hidden
    Sl = S // T
    gather = core.all_gather_hidden_viewed if wrong else core.all_gather_seq
    ranks = gather([np.full((1, Sl, D), float(r)) for r in range(T)])
    toks = gather([np.broadcast_to(np.arange(r * Sl, (r + 1) * Sl, dtype=float)[None, :, None], (1, Sl, D))
                   for r in range(T)])
    return ranks[0, :, 0].astype(int), toks[0, :, 0].astype(int)


def scattered_tokens(res: core.SpLayerResult, wrong: bool) -> list[np.ndarray]:
    """Token index of each row every rank keeps after the backward ReduceScatter of g (a sum of
    one buffer of token numbers and zeros: exact)."""
    T, S, D = res.tp, res.seq, res.hidden
    rs = core.reduce_scatter_hidden_viewed if wrong else core.reduce_scatter_seq
    ids = np.broadcast_to(np.arange(S, dtype=float)[None, :, None], (1, S, D))
    parts = rs([np.array(ids)] + [np.zeros((1, S, D)) for _ in range(T - 1)])
    return [p[0, :, 0].astype(int) for p in parts]


def _mask_sub(res: core.SpLayerResult, one: core.SpRank, rk: core.SpRank, key: str) -> Any:
    """✓ / ✗ under a masked block: is it this rank's block of the one-device mask?"""
    (a, b), (c, d) = rk.seq_range, rk.ffn_range
    ref = one.keep_H[:, :, c:d] if key == "keep_H" else one.keep_O[:, a:b]
    return label("fig.sp_mask_ok" if np.array_equal(getattr(rk, key), ref) else "fig.sp_mask_bad")


def _dropped(rk: core.SpRank, key: str) -> np.ndarray | None:
    m = getattr(rk, key)
    return None if m is None else ~_rows2(m)


def _forward(res: core.SpLayerResult, one: core.SpRank) -> list:
    """[(kind, payload)] of the forward pass: regions (a Block list per rank) and bands."""
    T, S = res.tp, res.seq
    wrong = res.mistake == "gather-wrong-dim"
    src, toks = gathered_sources(res, wrong)
    p = res.dropout > 0
    sp1, tp, sp2 = [], [], []
    for rk in res.ranks:
        r = rk.rank
        Sl = S // T
        own = [r] * Sl
        labels = [fmt.integer(t) for t in range(*rk.seq_range)]
        sp1.append([Block(f"X.{r}", "Xᵣ", own, res.hidden, r, labels=labels),
                    Block(f"A.{r}", "LN(Xᵣ)", own, res.hidden, r)])
        tp.append([Block(f"A_full.{r}", "A", [int(s) for s in src], res.hidden, r,
                         labels=[fmt.integer(t) for t in toks]),
                   Block(f"H.{r}", "Hᵣ", [r] * S, rk.W1.shape[1], r, dropped=_dropped(rk, "keep_H"),
                         sub=_mask_sub(res, one, rk, "keep_H") if p else None),
                   Block(f"O_partial.{r}", "HᵣW₂ᵣ", [r] * S, res.hidden, r, shade=1,
                         sub=label("fig.sp_partial"))])
        sp2.append([Block(f"O.{r}", "Oᵣ", own, res.hidden, r, dropped=_dropped(rk, "keep_O"),
                          sub=_mask_sub(res, one, rk, "keep_O") if p else None),
                    Block(f"Y.{r}", "Yᵣ", own, res.hidden, r)])
    g = "fig.sp_g_fwd_wrong" if wrong else "fig.sp_g_fwd"
    return [("region", ("sp", sp1)),
            ("band", ("g", g, label("fig.sp_all_tokens_wrong" if wrong else "fig.sp_all_tokens", s=fmt.integer(S)))),
            ("region", ("tp", tp)),
            ("band", ("ḡ", "fig.sp_gbar_fwd", label("fig.sp_own_tokens"))),
            ("region", ("sp-out", sp2))]


def _backward(res: core.SpLayerResult, one: core.SpRank) -> list:
    T, S, D = res.tp, res.seq, res.hidden
    wrong = res.mistake == "gather-wrong-dim"
    kept = scattered_tokens(res, wrong)
    p = res.dropout > 0
    sp1, tp, sp2 = [], [], []
    for rk in res.ranks:
        r = rk.rank
        Sl = S // T
        own = [r] * Sl
        labels = [fmt.integer(t) for t in range(*rk.seq_range)]
        sp1.append([Block(f"G_Y.{r}", "G_Yᵣ", own, D, r, labels=labels),
                    Block(f"G_O.{r}", "G_Oᵣ", own, D, r, dropped=_dropped(rk, "keep_O"),
                          sub=_mask_sub(res, one, rk, "keep_O") if p else None)])
        tp.append([Block(f"G_O_full.{r}", "G_O", [q for q in range(T) for _ in range(Sl)], D, r,
                         labels=[fmt.integer(t) for t in range(S)]),
                   Block(f"G_Z.{r}", "G_Zᵣ", [r] * S, rk.W1.shape[1], r, dropped=_dropped(rk, "keep_H"),
                         sub=_mask_sub(res, one, rk, "keep_H") if p else None),
                   Block(f"G_A_partial.{r}", "G_ZᵣW₁ᵣᵀ", [r] * S, D, r, shade=1, sub=label("fig.sp_partial"))])
        sp2.append([Block(f"G_A.{r}", "G_Aᵣ", own, D, r, labels=[fmt.integer(t) for t in kept[r]]),
                    Block(f"G_X.{r}", "G_Xᵣ", own, D, r)])
    g = "fig.sp_g_bwd_wrong" if wrong else "fig.sp_g_bwd"
    return [("region", ("sp", sp1)),
            ("band", ("ḡ", "fig.sp_gbar_bwd", label("fig.sp_all_tokens", s=fmt.integer(S)))),
            ("region", ("tp", tp)),
            ("band", ("g", g, label("fig.sp_own_tokens_wrong" if wrong else "fig.sp_own_tokens"))),
            ("region", ("sp-out", sp2))]


_REGION_TITLE = {"sp": "fig.sp_region_sp", "sp-out": "fig.sp_region_sp", "tp": "fig.sp_region_tp"}
# step -> (pass, which of the pass's five parts it lights: region, band, region, band, region)
STEP_PARTS = {"ln": ("forward", {0}), "gather": ("forward", {1}), "tp": ("forward", {2}), "scatter": ("forward", {3}),
              "residual": ("forward", {4}), "grad-gather": ("backward", {0, 1}), "grad-w": ("backward", {2}),
              "grad-scatter": ("backward", {3}), "grad-ln": ("backward", {4})}
STEP_ORDER = tuple(STEP_PARTS)


def _strip(step: str, width: float) -> Panel:
    """The nine steps as numbered circles, the active one lit, a gap between forward and backward;
    the step's name beside them on a desktop, under them on a phone."""
    current, split = STEP_ORDER.index(step) + 1, STEP_ORDER.index("grad-gather")
    strip = pass_strips(len(STEP_ORDER), split, current, width, "steps")
    key = step.replace("-", "_")
    if width >= STRIP_BESIDE:
        return flowed([[strip, centred(label(f"opt.step.{key}"), strip.h, "stage-name", w=width - strip.w - GAP)]],
                      width)
    # under the steps in a phone drawing, on two lines where one would not fit (opt.step in pieces)
    return column([strip, words([label(f"fig.sp_step_{key}_1"), label(f"fig.sp_step_{key}_2")], width,
                                "stage-name")])


def _band_name(op: str, title: str, width: float) -> Any:
    """A collective's name on its band: whole where it fits, else the operator and the collective
    (a phone; the line under it says what every rank holds after it)."""
    whole = label("fig.sp_band", op=op, what=label("fig.cat", a=label(f"{title}_1"), b=label(f"{title}_2")))
    if text_w(whole, "coll-t") <= width - 2 * FIG_PAD:
        return whole
    short = "all_gather" if title.startswith(("fig.sp_g_fwd", "fig.sp_gbar_bwd")) else "reduce_scatter"
    return label("fig.sp_band", op=op, what=label(f"opt.collective.{short}"))


def _pipeline(steps: list, T: int, step: str, max_w: float) -> list:
    """The steps for a drawing at most ``max_w`` wide: rank columns, regions, bands; the parts of
    the active step lit."""
    col_w = min(COL_MAX, (max_w - 2 * FIG_PAD - (T - 1) * GAP) / T)
    _, cols = col_groups([[col_w]] * T, range(T), GAP)
    width = span(cols).w
    lit = STEP_PARTS[step][1]
    out = [_strip(step, width), col_badges(cols)]
    for k, (kind, payload) in enumerate(steps):
        hl = " hl" if k in lit else ""
        if kind == "region":
            name, per_rank = payload
            # a rank's blocks in its column, with air either side
            body = col_panels(cols, [snake([b.panel() for b in blocks], col_w - 4) for blocks in per_rank])
            out.append(region([label(f"{_REGION_TITLE[name]}_{i}") for i in (1, 2)], body,
                              ("region tpr" if name == "tp" else "region") + hl, f"region-{k}"))
        else:
            op, title, sub = payload
            # the conversion as movement: each rank's tokens (its tint) into the gather, all of them
            # out to every rank; or each rank's partial into the sum, its own tokens' rows back
            kind = "allgather" if k == 1 else "reducescatter"
            out.append(collective_flow(kind, T, _band_name(op, title, width), sub, part=f"band-{k}", w=width,
                                       cls="coll" + hl))
    head, body = column(out[:2], gap=4), column(out[2:], gap=4)       # regions and collectives, a hair apart
    return [[column([head, body], gap=6)]]


def figure_sp(step: str, res: core.SpLayerResult, one: core.SpRank) -> dict:
    """The ``sp-layer`` figure: the pass the step belongs to, rank by rank, the step lit."""
    phase = STEP_PARTS[step][0]
    steps = _forward(res, one) if phase == "forward" else _backward(res, one)
    title = label(f"fig.sp_title_{phase}", tp=fmt.integer(res.tp), s=fmt.integer(res.seq),
                  step=label(f"opt.step.{step.replace('-', '_')}"))
    return figure_at("sp-layer", title, lambda w: _pipeline(steps, res.tp, step, w))


# ------------------------------------------------------------------------- γ and β

LN_BOX_W = 150.0       # the AllReduce box of sp-ln (wider where its words need it)
LANE_BADGE_W = 36.0    # draw.badge_panel's width
LANE_SLACK = 2 * 10.0 + 2 * (FIG_PAD + 6.0)    # flow's gaps, margins and a lane's inner edge


def figure_ln(res: core.SpLayerResult) -> dict:
    """``sp-ln``: each rank's γ/β gradients from its own tokens, the AllReduce over the TP group
    and what every rank steps with (under the mistake: the unreduced, differing replicas).

    A rank's lane is its badge and its two partial gradients; on a phone they wrap under the badge
    (not beside it: a grid of four numbers is as wide as the column)."""
    reduced = res.mistake != "ln-grad-not-reduced"
    T = res.tp
    scale = max(float(np.max(np.abs(getattr(res.reference, k)))) for k in ("G_gamma", "G_beta"))

    def rows(max_w: float):
        out = []
        for rk in res.ranks:
            r = rk.rank
            tokens = label("fig.sp_tokens", a=fmt.integer(rk.seq_range[0]), b=fmt.integer(rk.seq_range[1] - 1))
            panels = [matrix_panel(rk.G_gamma_partial, "G_γ", r, f"G_gamma_partial.{r}", scale, shape=tokens),
                      matrix_panel(rk.G_beta_partial, "G_β", r, f"G_beta_partial.{r}", scale, shape=tokens)]
            h = max(p.h for p in panels)
            one_line = LANE_BADGE_W + sum(p.w for p in panels) + LANE_SLACK <= max_w
            # beside the grids, centred on them; alone on the lane's first line above them
            out.append(Row([lane_badge(r, h, "numbers") if one_line else badge_panel(r, 22, 0)] + panels, rank=r))
        box_h = 2 * CELL_H
        if reduced:
            box = op_box(label("fig.sp_ln_box"), label("fig.sum_ranks", last="R" + fmt.integer(T - 1)), LN_BOX_W,
                         "coll", "ln-allreduce", h=box_h, top=LABEL_H, title_y=CELL_H * 0.75, sub_y=CELL_H * 1.55,
                         lit="hl")
            ref = res.reference
            err = max(float(np.max(np.abs(getattr(res.sharded, k) - getattr(ref, k)))) for k in ("G_gamma", "G_beta"))
            tol = min(res.tolerances[k] for k in ("G_gamma", "G_beta"))
            check_text = label("fig.matches_ref" if err <= tol else "fig.sp_off_ref", err=fmt.err(err))
            out.append([box, arrow_panel(None, w=30, h=box_h + LABEL_H),
                        matrix_panel(res.sharded.G_gamma, label("fig.every_rank", name="G_γ"),
                                     None, "G_gamma", scale, shape=check_text),
                        matrix_panel(res.sharded.G_beta, label("fig.every_rank", name="G_β"),
                                     None, "G_beta", scale)])
        else:
            # skipped: the box as wide as what it says, the words beside it wrapped to the column
            none = label("fig.sp_ln_box_none")
            box = op_box(label("fig.sp_ln_box_skipped"), none, max(LN_BOX_W, text_w(none) + 12), "coll skip",
                         "ln-allreduce", h=box_h, top=LABEL_H, title_y=CELL_H * 0.75, sub_y=CELL_H * 1.55, lit="dim")
            drift = flowed([[note_panel([label("fig.sp_ln_drift1_1"), label("fig.sp_ln_drift1_2")], NOTE_W, "op")],
                            [note_panel(label("fig.sp_ln_drift2"), NOTE_W, "op")]], NOTE_W, row_gap=0)
            out.append([box, column([Panel(drift.w, LABEL_H - 4), drift])])     # level with the box's top
        return out

    title = label("fig.sp_ln_title", tp=fmt.integer(T))
    return figure_at("sp-ln", title, rows)


# ------------------------------------------------------------------------------ memory

SEGMENTS = (("parameters", "mem-w"), ("gradients", "mem-g"), ("optimizer", "mem-o"), ("activations", "mem-a"))
BAR_LABEL_W = 104.0
BAR_VALUE_W = 64.0
BARS_WIDE = 640.0           # the desktop drawing; the phone one is tree.NARROW_W wide


def _cfg_name(name: str):
    return label(f"fig.mem_cfg_{name.replace('-', '_')}")


def _legend(segments: tuple, prefix: str, width: float) -> list:
    """The legend of a stacked-bar chart: its keys in aligned columns (all on one line when wide)."""
    per_line = len(segments) if width >= STRIP_BESIDE else 2
    return [key(f"mem-seg {cls}", label(f"fig.{prefix}{k}"), (width - 2 * FIG_PAD) / per_line - GAP)
            for k, cls in segments]


def _name_w(names) -> float:
    """The configurations' names right-aligned before the bars: room for the widest (lit: bold)."""
    return max(BAR_LABEL_W, max(text_w(_cfg_name(name), "cap") for name in names) + 6)


def _segs(per: dict, segments: tuple, unit: float, name: str, texts: dict | None = None) -> list:
    """A bar's segments ``unit`` px per byte (a sliver at least), each with its text if given."""
    return [Seg(max(unit * per[k], 0.5), f"mem-seg {cls}", f"{name}.{k}", (texts or {}).get(k), "lbl")
            for k, cls in segments if per[k] > 0]


def _bars(r: MemoryResult, totals: dict, line_bytes: float, width: float) -> list:
    """The stacked bars in a drawing ``width`` wide (legend, one bar per configuration, the line)."""
    top = max(t["total"] for t in totals.values())
    draw_line = top >= line_bytes / 2
    axis = max(top, line_bytes) if draw_line else top
    name_w = _name_w(totals)
    bar_w = width - 2 * FIG_PAD - name_w - BAR_VALUE_W
    rows = []
    for name, per in totals.items():
        segs = _segs(per, SEGMENTS, bar_w / axis if axis else 0.0, name)
        rows.append((f"bar-{name}", _cfg_name(name), bar(segs, None, (fmt.nbytes(per["total"]), "num")),
                     name == r.configuration, sum(s.w for s in segs)))
    ref = (bar_w * line_bytes / axis, label("fig.mem_line", size=fmt.nbytes(line_bytes))) if draw_line else None
    return [_legend(SEGMENTS, "mem_seg_", width), [bar_rows(rows, name_w, ref, width - 2 * FIG_PAD)]]


def figure_memory(r: MemoryResult, totals: dict, line_bytes: float) -> dict:
    """``memory``: one stacked bar per configuration at the chosen t (weights, gradients, optimizer
    states, activations), the chosen one lit; a line at 80 GiB when the bars come near it."""
    title = label("fig.mem_title", t=fmt.integer(r.inputs["tp"]))
    return figure_at("memory", title, lambda w: _bars(r, totals, line_bytes, min(BARS_WIDE, w)))


LAYER_SEGMENTS = (("tp", "mem-tp"), ("sp", "mem-sp"), ("neither", "mem-rep"))   # memory.DIVIDED_BY


def _layer_bars(lit: str, splits: dict, per_layer: dict, terms: dict, width: float) -> list:
    """One layer's activations per configuration, split by what divides them (legend, bars)."""
    axis = max(per_layer[name] for name in splits)
    name_w = _name_w(splits)
    unit = (width - 2 * FIG_PAD - name_w - BAR_VALUE_W) / axis if axis else 0.0
    rows = []
    for name, per in splits.items():
        segs = _segs(per, LAYER_SEGMENTS, unit, name, terms[name])
        rows.append((f"layer-{name}", _cfg_name(name), bar(segs, None, (fmt.nbytes(per_layer[name]), "num")),
                     name == lit, sum(s.w for s in segs)))
    # keys as wide as their words: the flow puts as many on a line as fit
    legend = [key(f"mem-seg {cls}", label(f"fig.mem_div_{k}")) for k, cls in LAYER_SEGMENTS]
    return [legend, [bar_rows(rows, name_w, None, width - 2 * FIG_PAD)]]


def figure_memory_layer(r: MemoryResult, splits: dict, terms: dict) -> dict:
    """``memory-layer``: one layer's activations on one rank for each configuration at the chosen
    t, split into what TP divides, what only SP divides and what neither does (``splits``:
    :func:`tpmath.memory.split_by_divisor` of each; ``terms``: the formula's term of each part),
    the chosen configuration lit."""
    lit = "tp" if r.configuration == "none" else r.configuration     # at t = 1 the TP row is the setting
    title = label("fig.mem_layer_title", t=fmt.integer(r.inputs["tp"]))
    return figure_at("memory-layer", title,
                     lambda w: _layer_bars(lit, splits, r.table2, terms, min(BARS_WIDE, w)))


# ------------------------------------------------------------------------------ dropout

DROPOUT_CASES = ("replicated", "sharded-same", "sharded-offset")     # views.sp_layer.dropout_masks


def _mask_panel(case: str, r: int, keep: np.ndarray, first: np.ndarray, sharded: bool) -> Panel:
    """Rank r's mask as a token map of its tokens (tinted by r if they are its shard), its dropped
    entries crossed, and under it whether it is rank 0's mask."""
    lo = r * len(keep) if sharded else 0
    sub = None if r == 0 else label("fig.dr_eq0" if np.array_equal(keep, first) else "fig.dr_ne0")
    return token_panel(f"R{r}", [r if sharded else None] * len(keep), keep.shape[1], r, 3,
                       [fmt.integer(lo + i) for i in range(len(keep))], ~keep, sub, f"dr-{case}-{r}", CELL, SUB_W)


def figure_dropout(masks: dict, tp: int, seq: int) -> dict:
    """``dropout``: for each case of :data:`DROPOUT_CASES` its heading, every rank's mask and
    what that means (``masks``: case -> the core's keep-mask of each rank)."""
    def rows(max_w: float):
        w = min(max_w, BARS_WIDE) - 2 * FIG_PAD
        out = []
        for case in DROPOUT_CASES:
            key_ = case.replace("-", "_")
            sharded = case != "replicated"
            out.append([words(label(f"fig.dr_case_{key_}"), w, "cap")])
            out.append(Row([_mask_panel(case, r, m, masks[case][0], sharded) for r, m in enumerate(masks[case])]))
            out.append([note_panel([label(f"fig.dr_verdict_{key_}_1", k=fmt.integer(seq // tp)),
                                    label(f"fig.dr_verdict_{key_}_2", k=fmt.integer(seq // tp))], w, "op")])
        return out

    return figure_at("dropout", label("fig.dr_title", t=fmt.integer(tp), s=fmt.integer(seq)), rows)
