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
states and the activations of one rank for each configuration of Table 2 at the chosen t.
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
from .draw import (CELL_H, LABEL_H, NARROW_W, PAD as FIG_PAD, Panel, Row, arrow_head, arrow_panel, badge, badge_panel,
                   circle, flow, flowed, group, label, lane_badge, line, matrix_panel, mid_text, moved, note_panel, op_box,
                   pair, rect, text, text_w, token_map, wrapped)

CELL = 12.0            # one entry of a token map
ARROW = 14.0           # a horizontal arrow between two blocks of a column
DROP_ARROW = 16.0      # a vertical arrow between stacked blocks / into and out of a band
CAP_H = 16.0           # the caption line above a block
SUB_H = 14.0           # the line under a block (partial, mask check)
LABEL_W = 14.0         # the token indices left of a gathered block
SUB_W = 52.0           # room a translated sub-caption needs (about 8 Latin letters or 4 Chinese characters)
PAD, GAP = 8.0, 10.0
BAND_H = 38.0
REGION_T = 18.0        # the region's title line
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
    x0: float = 0.0               # where _lines put it in its column

    @property
    def grid_x(self) -> float:
        return LABEL_W if self.labels is not None else 0.0

    @property
    def w(self) -> float:
        return max(self.grid_x + self.cols * CELL, _text_w(self.caption),
                   _text_w(self.sub) if self.sub is not None else 0.0)

    @property
    def h(self) -> float:
        return CAP_H + len(self.rows) * CELL + (SUB_H if self.sub is not None else 0.0)

    def draw(self, x: float, y: float) -> dict:
        gx, gy = x + self.grid_x, y + CAP_H
        kids = [text(gx, y + CAP_H - 4, self.caption, "cap")]
        kids += token_map(gx, gy, self.rows, self.cols, self.owner, CELL, self.shade, self.labels, self.dropped)
        if self.sub is not None:
            kids.append(text(gx, gy + len(self.rows) * CELL + 11, self.sub, "dimtext"))
        return group(kids, part=self.part)


def _lines(blocks: list[Block], width: float) -> list[list[Block]]:
    """Blocks cut into lines that fit ``width``: a line ends where the next block would not fit,
    and the next line starts under the last block of the one before (a snake)."""
    lines, run, x = [], [], 0.0
    for b in blocks:
        if run and x + ARROW + b.w > width:
            lines.append(run)
            last = run[-1]
            run, x = [], last.x0                # under the block it continues from
        x = x + ARROW if run else x
        b.x0 = x if run or not lines else min(x, max(0.0, width - b.w))
        run.append(b)
        x = b.x0 + b.w
    return lines + [run]


def _stack(blocks: list[Block], width: float) -> tuple[list[dict], float, float]:
    """One rank's blocks of a region, left to right with arrows, continuing on a new line under
    the last block when the column is too narrow.  Returns (nodes, used width, height)."""
    lines = _lines(blocks, width)
    used = max(b.x0 + b.w for run in lines for b in run)
    dx = (width - used) / 2                      # centre the whole stack in the column
    nodes, y = [], 0.0
    for k, run in enumerate(lines):
        for i, b in enumerate(run):
            nodes.append(b.draw(dx + b.x0, y))
            if i + 1 < len(run):
                ax = dx + b.x0 + b.w
                ay = y + CAP_H + min(len(b.rows), len(run[i + 1].rows)) * CELL / 2
                nodes += [line(ax + 2, ay, ax + ARROW - 6, ay, "arrow"), arrow_head(ax + ARROW - 1, ay, 0)]
        y += max(b.h for b in run)
        if k + 1 < len(lines):
            last = run[-1]
            nodes += _down(dx + last.x0 + last.grid_x + last.cols * CELL / 2, y + 1, DROP_ARROW - 2)
            y += DROP_ARROW
    return nodes, used, y


def _down(x: float, y: float, length: float) -> list[dict]:
    return [line(x, y, x, y + length - 6, "arrow"),
            arrow_head(x, y + length, 90)]


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


def _strip(step: str, width: float) -> tuple[list[dict], float]:
    """The nine steps as numbered circles, the active one lit, a gap between forward and backward;
    the step's name beside them on a desktop, under them on a phone."""
    nodes, x, y = [], PAD + 12, 16.0
    centres = []
    for i, name in enumerate(STEP_ORDER):
        if name == "grad-gather":
            x += 14                      # forward | backward
        centres.append(x)
        x += 28
    nodes.append(line(centres[0], y, centres[4], y, "strip"))
    nodes.append(line(centres[5], y, centres[-1], y, "strip"))
    for i, (name, cx) in enumerate(zip(STEP_ORDER, centres)):
        nodes.append(circle(cx, y, 10, "step hl" if name == step else "step"))
        nodes.append(mid_text(cx, y, fmt.integer(i + 1), "step-t"))
    name = label(f"opt.step.{step.replace('-', '_')}")
    if width >= 560:
        nodes.append(text(centres[-1] + 22, y + 5, name, "stage-name"))
        return [group(nodes, part="steps")], 36.0
    # under the steps in a phone drawing, on two lines where one would not fit (opt.step in pieces)
    key = f"fig.sp_step_{step.replace('-', '_')}"
    name, lines = wrapped(PAD, y + 30, [label(key + "_1"), label(key + "_2")], width - 2 * PAD, "stage-name", line_h=16)
    nodes.append(name)
    return [group(nodes, part="steps")], 58.0 + (lines - 1) * 16


def _pipeline(steps: list, T: int, step: str, max_w: float) -> tuple[list[dict], float, float]:
    """Lay the steps out for a drawing at most ``max_w`` wide: rank columns, regions, bands; the
    parts of the active step lit."""
    col_w = min(300.0, (max_w - 2 * PAD - (T - 1) * GAP) / T)
    width = 2 * PAD + T * col_w + (T - 1) * GAP
    x_of = [PAD + r * (col_w + GAP) for r in range(T)]
    lit = STEP_PARTS[step][1]
    nodes, y = _strip(step, width)
    for r in range(T):      # a badge on top of every column: colour is never the only cue
        nodes += badge(r, x_of[r] + col_w / 2 - 17, y, 34)
    y += 26
    for k, (kind, payload) in enumerate(steps):
        hl = " hl" if k in lit else ""
        if kind == "region":
            name, per_rank = payload
            stacks = [_stack(blocks, col_w - 4) for blocks in per_rank]
            inner = max(h for _, _, h in stacks)
            title, lines = wrapped(PAD, y + 13, [label(f"{_REGION_TITLE[name]}_{i}") for i in (1, 2)],
                                   width - 2 * PAD, "region-t")
            top = REGION_T + (lines - 1) * 15
            h = top + inner + 10
            cls = ("region tpr" if name == "tp" else "region") + hl
            parts = [rect(PAD / 2, y, width - PAD, h, {"class": cls}, rx="6"), title]
            for r, (kids, _, _) in enumerate(stacks):
                parts.append(moved(kids, x_of[r] + 2, y + top + 4, **{"data-rank-column": str(r)}))
            nodes.append(group(parts, part=f"region-{k}"))
            y += h
        else:
            op, title, sub = payload
            parts = []
            for r in range(T):
                parts += _down(x_of[r] + col_w / 2, y + 1, DROP_ARROW - 2)
            y += DROP_ARROW
            name, lines = wrapped(width / 2, y + 15, [label("fig.sp_band", op=op, what=label(f"{title}_1")),
                                                      label(f"{title}_2")], width - 2 * PAD - 8, "coll-t", "middle")
            more = (lines - 1) * 15
            parts += [rect(PAD, y, width - 2 * PAD, BAND_H + more, {"class": "coll" + hl}, rx="6"), name,
                      text(width / 2, y + 30 + more, sub, "coll-s", "middle")]
            y += BAND_H + more
            for r in range(T):
                parts += _down(x_of[r] + col_w / 2, y + 1, DROP_ARROW - 2)
            y += DROP_ARROW
            nodes.append(group(parts, part=f"band-{k}"))
    return nodes, width, y + PAD


def figure_sp(step: str, res: core.SpLayerResult, one: core.SpRank) -> dict:
    """The ``sp-layer`` figure: the pass the step belongs to, rank by rank, the step lit."""
    phase = STEP_PARTS[step][0]
    steps = _forward(res, one) if phase == "forward" else _backward(res, one)
    title = label(f"fig.sp_title_{phase}", tp=fmt.integer(res.tp), s=fmt.integer(res.seq),
                  step=label(f"opt.step.{step.replace('-', '_')}"))
    return pair("sp-layer", title, lambda w: _pipeline(steps, res.tp, step, w))


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
            out.append([box, Panel(drift.w, LABEL_H + drift.h, [moved(drift.nodes, 0, LABEL_H)])])
        return out

    title = label("fig.sp_ln_title", tp=fmt.integer(T))
    return pair("sp-ln", title, lambda max_w: flow(rows(max_w), max_w))


# ------------------------------------------------------------------------------ memory

SEGMENTS = (("parameters", "mem-w"), ("gradients", "mem-g"), ("optimizer", "mem-o"), ("activations", "mem-a"))
BAR_LABEL_W = 104.0
BAR_VALUE_W = 64.0
BAR_H = 18.0
BAR_GAP = 8.0
BARS_WIDE = 640.0           # the desktop drawing; the phone one is tree.NARROW_W wide


def _cfg_name(name: str):
    return label(f"fig.mem_cfg_{name.replace('-', '_')}")


def _bars(r: dict, totals: dict, line_bytes: float, width: float) -> tuple[list[dict], float, float]:
    """The stacked bars in a drawing ``width`` wide (legend, one bar per configuration, the line)."""
    top = max(t["total"] for t in totals.values())
    draw_line = top >= line_bytes / 2
    axis = max(top, line_bytes) if draw_line else top
    # the configurations' names right-aligned before the bars: room for the widest (lit: bold)
    x0 = PAD + max(BAR_LABEL_W, max(text_w(_cfg_name(name), "cap") for name in totals) + 6)
    bar_w = width - x0 - BAR_VALUE_W - PAD
    nodes = []
    for i, (key, cls) in enumerate(SEGMENTS):     # the legend: a swatch and a word each
        x = PAD + (i % 2) * 180 if width < 560 else PAD + i * 150
        y = 8 + (i // 2) * 18 if width < 560 else 8
        nodes += [rect(x, y, 12, 12, {"class": f"mem-seg {cls}"}),
                  text(x + 17, y + 6, label(f"fig.mem_seg_{key}"), "lbl", **{"dominant-baseline": "central"})]
    y = 52.0 if width < 560 else 34.0
    top_y = y
    if draw_line:                                # behind the bars and their numbers
        lx = x0 + bar_w * line_bytes / axis
        nodes.append(line(lx, top_y - 4, lx, top_y + len(totals) * (BAR_H + BAR_GAP), "mem-line"))
    for name, per in totals.items():
        lit = name == r.configuration
        kids = [text(x0 - 6, y + BAR_H / 2, _cfg_name(name),
                     "cap" if lit else "lbl", "end", **{"dominant-baseline": "central"})]
        x = x0
        for key, cls in SEGMENTS:
            w = bar_w * per[key] / axis if axis else 0.0
            if w > 0:
                kids.append(rect(x, y, max(w, 0.5), BAR_H, {"class": f"mem-seg {cls}"}))
            x += w
        if lit:
            kids.append(rect(x0 - 2, y - 2, x - x0 + 4, BAR_H + 4, {"class": "frame-hl"}, rx="2"))
        kids.append(text(x + 5, y + BAR_H / 2, fmt.nbytes(per["total"]), "num", **{"dominant-baseline": "central"}))
        nodes.append(group(kids, part=f"bar-{name}", cls="hl" if lit else None))
        y += BAR_H + BAR_GAP
    if draw_line:
        nodes.append(text(x0 + bar_w * line_bytes / axis, y + 10,
                          label("fig.mem_line", size=fmt.nbytes(line_bytes)), "dimtext", "middle"))
        y += 16
    return nodes, width, y + PAD


def figure_memory(r: MemoryResult, totals: dict, line_bytes: float) -> dict:
    """``memory``: one stacked bar per configuration at the chosen t (weights, gradients, optimizer
    states, activations), the chosen one lit; a line at 80 GiB when the bars come near it."""
    title = label("fig.mem_title", t=fmt.integer(r.inputs["tp"]))
    return pair("memory", title,
                        lambda w: _bars(r, totals, line_bytes, BARS_WIDE if w > NARROW_W else NARROW_W))
