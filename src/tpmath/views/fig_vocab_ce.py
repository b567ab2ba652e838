"""Figures of vocabulary-parallel cross-entropy (page 1, sections ``vocab-ce`` and ``vocab-extras``).

``vocab-ce``: one column per vocabulary id, grouped by the rank that owns it, read top to
bottom in the order Megatron computes: the shards (padding dashed), the logits, each rank's
maximum and the AllReduce(MAX), the target term and its AllReduce(SUM), the local Σ exp and
its AllReduce(SUM), the loss, then the probability and gradient of every id, computed
locally.  The target's column is lit all the way down.  The logits hang from the line of
the global maximum m: the drawing is the same for every shift, only the labels change.  On a
phone the ids share the column's width; numbers wider than their id alternate over two lines.

``vocab-extras``: padding, ignore_index and label smoothing as three panels, two a line on a
desktop, one on a phone, each drawn for the width it gets (captions wrap at their pieces).

Every number is a string of the section's tables (same core result, same :mod:`fmt` call).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import fmt
from ..vocab_ce import VocabCeResult, VocabPad
from .draw import (CAP_H, PAD, Panel, band, badge, down_arrow, flow, flowed, hline, label, line, mid_text,
                   note_panel, num_w, pair, rank_attrs, rect, text, text_w, widest, wrapped)

PAD_W = 16.0            # a padding id: no number to show, only its id
GAP = 8.0               # between two ranks' groups
MIN_W = 330.0           # room for the captions on a desktop
M_W = 12.0              # the label m right of the line of the global maximum
HANG_H = 46.0           # the longest logit bar (m − min zⱼ)
PROB_H = 60.0           # px per unit of probability and gradient
BOX_H = 20.0
BAND_H = 24.0
NUM_LINE = 14.0         # one line of numbers (a second one where they are staggered)
ARROW_H = 12.0          # a rank's box down to the AllReduce band
CAP_LINE = 15.0         # one more line of a wrapped caption
_SUB = "₀₁₂₃₄₅₆₇₈₉"
BADGE_W, BADGE_H = 34.0, 20.0
SLOT_H = 22.0           # a vocabulary id


@dataclass
class Slot:
    """One vocabulary id: its column and owner."""

    j: int
    rank: int
    x: float
    w: float
    real: bool

    @property
    def cx(self) -> float:
        return self.x + self.w / 2


@dataclass
class Layout:
    """Where the ids and the ranks' groups sit, and which rows of numbers need two lines (a number
    wider than its column alternates up and down with its neighbours')."""

    slots: list
    groups: list             # (x, width) of every rank's group
    content_w: float
    stagger_logits: bool
    stagger_labels: bool     # the probabilities and gradients
    box_w: float             # a rank's box in the AllReduce steps
    stagger_boxes: bool      # boxes wider than their group: even ranks on one line, odd on the next


def _pieces(key: str, count: int, **args) -> list:
    """The pieces of a caption that wraps (``<lang>.figwrap.toml``: key_1 … key_n)."""
    return [label(f"{key}_{i}", **args) for i in range(1, count + 1)]


def _slot(j: int, rank: int, real: bool, x: float, y: float, w: float) -> list[dict]:
    """Vocabulary id j: its box in its owner's tint (dashed: padding) with the id inside."""
    return [rect(x, y, w, SLOT_H, rank_attrs(rank, "slot" if real else "slot pad"), **{"data-key": f"slot.{j}"}),
            mid_text(x + w / 2, y + SLOT_H / 2, fmt.integer(j), "idx" if real else "idx dimtext")]


def _slots(res: VocabCeResult, avail: float) -> Layout:
    """Columns of every id and of every rank's group in at most ``avail`` px: on a desktop as wide
    as their numbers, on a phone as wide as the column allows."""
    V, Vp = res.vocab, res.padded_vocab
    logits = [fmt.num(t) for t in _real_logits(res)]
    labels = [fmt.num(t.prob) for t in res.tokens] + [fmt.num(t.grad) for t in res.tokens]
    # mᵣ is also the bold logit above, so its box may fall back to the symbol (see reduce_step).
    stats = [fmt.num(getattr(e, k)) for e in res.ranks for k in ("target_shifted", "local_sum_exp")]
    box_w = widest(stats) + 8
    natural = max(44.0, widest(labels) + 6, (widest(logits) + 8) / 2)
    fit = (avail - GAP * (res.shards - 1) - PAD_W * (Vp - V)) / V
    slot_w = min(natural, fit)
    inners = [sum(slot_w if j < V else PAD_W for j in range(*e.vocab_range)) for e in res.ranks]
    roomy = sum(max(i, box_w) for i in inners) + GAP * (res.shards - 1) <= avail
    slots, groups, x = [], [], PAD
    for e, inner in zip(res.ranks, inners):
        a, b = e.vocab_range
        gw = max(inner, box_w) if roomy else inner
        sx = x + (gw - inner) / 2
        for j in range(a, b):
            w = slot_w if j < V else PAD_W
            slots.append(Slot(j, e.rank, sx, w, j < V))
            sx += w
        groups.append((x, gw))
        x += gw + GAP
    return Layout(slots, groups, x - GAP - PAD, widest(logits) + 4 > slot_w, widest(labels) + 4 > slot_w,
                  box_w, not roomy)


def _real_logits(res: VocabCeResult) -> list[float]:
    """zⱼ of the real ids 0 … V−1 (the ranks' logits without their padding)."""
    out = []
    for e in res.ranks:
        a, b = e.vocab_range
        out += [float(v) for j, v in zip(range(a, b), np.atleast_1d(e.logits)) if j < res.vocab]
    return out


class _Drawing:
    """A cursor down the page of the figure: each step appends its shapes below the last, in a
    drawing at most ``max_w`` wide."""

    def __init__(self, res: VocabCeResult, max_w: float):
        self.res = res
        lay = _slots(res, max_w - 2 * PAD - M_W)
        self.lay, self.slots, self.groups, self.content_w = lay, lay.slots, lay.groups, lay.content_w
        # on a desktop as wide as the widest caption, so that none wraps (pieces add up: an estimate
        # per character)
        longest = max(sum(text_w(p, "cap") for p in pieces) for pieces in _captions(res)) + 1     # + rounding
        self.w = min(max(self.content_w + M_W, MIN_W, longest), max_w - 2 * PAD) + 2 * PAD
        self.y = PAD
        self.nodes: list[dict] = []
        self.m = float(res.global_max)

    def add(self, *nodes):
        self.nodes.extend(nodes)

    def caption(self, pieces: list, cls: str = "cap") -> None:
        """A caption line (more where it does not fit the drawing) and the air under it."""
        node, lines = wrapped(PAD, self.y + 11, pieces, self.w - 2 * PAD, cls, line_h=CAP_LINE)
        self.add(node)
        self.y += CAP_H + 2 + (lines - 1) * CAP_LINE

    def header(self) -> None:
        res = self.res
        if res.padded_vocab != res.vocab:
            self.caption([label("fig.vc_vocab_pad_1", V=fmt.integer(res.vocab), Vp=fmt.integer(res.padded_vocab),
                                p=fmt.integer(res.shards)), label("fig.vc_vocab_pad_2")])
        else:
            self.caption(_pieces("fig.vc_vocab", 2, last=fmt.integer(res.vocab - 1), p=fmt.integer(res.shards)))
        for e, (gx, gw) in zip(res.ranks, self.groups):
            bw = min(BADGE_W, gw)
            self.add(*badge(e.rank, gx + (gw - bw) / 2, self.y, bw, BADGE_H))
        self.y += BADGE_H + 4
        self.slot_y = self.y
        for s in self.slots:
            self.add(*_slot(s.j, s.rank, s.real, s.x, self.y, s.w))
        self.y += SLOT_H
        # under the target's id, kept inside the drawing at either edge
        tgt, mark = self.target_slot(), label("fig.vc_target")
        half = text_w(mark, "op") / 2
        x = min(max(tgt.cx, PAD + half), self.w - PAD - half)
        self.add(text(x, self.y + 11, mark, "op", "middle"))
        self.y += CAP_H + 2

    def target_slot(self) -> Slot:
        return next(s for s in self.slots if s.j == self.res.target)

    def inside(self, cx: float, s: str) -> float:
        """The centre of a number at ``cx``, moved in where it would stick out of the drawing (an id at
        either edge on a phone is narrower than its number)."""
        half = num_w(s) / 2
        return min(max(cx, half + 1), self.w - half - 1)

    def numbers(self, slots: list, values: dict, key: str, stagger: bool, y: float, cls=None) -> None:
        """One number per id, on one line or alternating over two."""
        for i, s in enumerate(slots):
            v = fmt.num(values[s.j])
            self.add(text(self.inside(s.cx, v), y + NUM_LINE * (i % 2 if stagger else 0), v,
                          cls(s) if cls else "num", "middle", **{"data-key": f"{key}.{s.j}"}))

    def logits(self) -> None:
        """The logits as numbers under their ids (each rank's maximum bold), then as bars hanging
        from the line of the global maximum m by m − zⱼ."""
        self.caption(_pieces("fig.vc_logits", 3))
        z = dict(enumerate(self._logit_values()))               # real ids are 0 … V−1, in order
        local_max = {e.rank: float(e.local_max) for e in self.res.ranks}
        real = [s for s in self.slots if s.real]
        rows = 2 if self.lay.stagger_logits else 1
        self.numbers(real, z, "z", rows == 2, self.y + 11,
                     lambda s: "num em" if z[s.j] == local_max[s.rank] else "num")
        for e in self.res.ranks:
            pads = [s for s in self.slots if s.rank == e.rank and not s.real]
            if pads:     # masked to −∞: one label for the rank's padding ids
                cx = (pads[0].x + pads[-1].x + pads[-1].w) / 2
                self.add(text(cx, self.y + 11, "−∞", "num dimtext", "middle", **{"data-key": f"zpad.{e.rank}"}))
        self.y += NUM_LINE * rows + 6
        top = self.y
        depth = max(self.m - v for v in z.values()) or 1.0
        unit = HANG_H / depth
        self.add(hline(PAD, PAD + self.content_w, top, "axis"),
                 mid_text(PAD + self.content_w + 4, top, "m", "op", "start"))
        for s in real:
            self.add(rect(s.x + 6, top, s.w - 12, (self.m - z[s.j]) * unit, rank_attrs(s.rank, "bar"),
                          **{"data-key": f"zbar.{s.j}"}))
        self.y = top + HANG_H + 10

    def _logit_values(self) -> list[float]:
        return _real_logits(self.res)

    def reduce_step(self, caption: list, stat: str, result, part: str) -> None:
        """Per rank one number, arrows into the AllReduce band, the band with the result."""
        self.caption(caption)
        two = self.lay.stagger_boxes and self.res.shards > 1
        for e, (gx, gw) in zip(self.res.ranks, self.groups):
            r = e.rank
            value = fmt.num(getattr(e, stat))
            # on two lines a box may reach into its neighbours' groups (theirs are on the other line)
            bw = min(self.lay.box_w, 2 * gw + GAP - 4) if two else gw - 4
            cx, by = gx + gw / 2, self.y + (BOX_H + 4) * (r % 2 if two else 0)
            self.add(rect(cx - bw / 2, by, bw, BOX_H, rank_attrs(r, "box"), rx="3"))
            if widest([value]) + 6 <= bw:
                self.add(mid_text(cx, by + BOX_H / 2, value, "num", **{"data-key": f"{stat}.{r}"}))
            else:        # only mᵣ can be too wide: its value is the bold logit just above
                self.add(mid_text(cx, by + BOX_H / 2, "m" + _SUB[r], "op"))
            self.add(*down_arrow(cx, by + BOX_H, self.y + (BOX_H + 4) * (2 if two else 1) - 4 + ARROW_H))
        self.y += (BOX_H + 4) * (2 if two else 1) - 4 + ARROW_H
        self.add(band(PAD, self.y, self.content_w, BAND_H, result, part=part))
        self.y += BAND_H + 10

    def loss(self) -> None:
        res = self.res
        self.add(mid_text(PAD + self.content_w / 2, self.y + 10, label("fig.vc_loss", loss=fmt.num(res.loss)),
                          "stage-name"))
        self.y += 30

    def probabilities(self) -> None:
        """pⱼ as bars up from a baseline (PROB_H px per unit), the number above; padding: nothing."""
        self.caption(_pieces("fig.vc_prob", 2))
        probs = {t.token: float(t.prob) for t in self.res.tokens}
        up = max(probs.values()) * PROB_H
        base = self._labels_above(probs, "p", up)
        self.add(hline(PAD, PAD + self.content_w, base, "axis"))
        for s in (s for s in self.slots if s.real):
            h = probs[s.j] * PROB_H
            self.add(rect(s.x + 6, base - h, s.w - 12, h, rank_attrs(s.rank, "bar"), **{"data-key": f"pbar.{s.j}"}))
        self.y = base + 10

    def gradient(self) -> None:
        """∂L/∂zⱼ on the same scale as pⱼ: the target's bar is pulled down by exactly 1."""
        self.caption(_pieces("fig.vc_grad", 2))
        grads = {t.token: float(t.grad) for t in self.res.tokens}
        up = max(max(grads.values()), 0.0) * PROB_H
        down = max(-min(grads.values()), 0.0) * PROB_H
        zero = self._labels_above(grads, "g", up)
        self.add(hline(PAD, PAD + self.content_w, zero, "axis"))
        for s in (s for s in self.slots if s.real):
            g = grads[s.j]
            h = abs(g) * PROB_H
            self.add(rect(s.x + 6, zero - h if g >= 0 else zero, s.w - 12, h, rank_attrs(s.rank, "bar"),
                          **{"data-key": f"gbar.{s.j}"}))
            if not self.lay.stagger_labels:     # the number at the bar's end
                v = fmt.num(g)
                self.add(text(self.inside(s.cx, v), zero - h - 4 if g >= 0 else zero + h + 12, v, "num", "middle",
                              **{"data-key": f"g.{s.j}"}))
        self.y = zero + down + (18 if not self.lay.stagger_labels else 8)

    def _labels_above(self, values: dict, key: str, up: float) -> float:
        """The numbers of a bar chart whose bars reach ``up`` px above its axis: where they fit, the
        probabilities at their bars' ends (gradients: drawn with their bars); where they do not, in
        two alternating lines above the chart.  Returns the y of the axis."""
        if not self.lay.stagger_labels:
            base = self.y + 14 + up
            if key == "p":
                for s in (s for s in self.slots if s.real):
                    v = fmt.num(values[s.j])
                    self.add(text(self.inside(s.cx, v), base - values[s.j] * PROB_H - 4, v, "num", "middle",
                                  **{"data-key": f"p.{s.j}"}))
            return base
        real = [s for s in self.slots if s.real]
        self.numbers(real, values, key, True, self.y + 11)
        return self.y + 2 * NUM_LINE + 4 + up

    def target_column(self, top: float) -> dict:
        """The target's column lit from its slot to the bottom (drawn first, behind everything)."""
        s = self.target_slot()
        return rect(s.x, top, s.w, self.y - top, {"class": "tgt"}, **{"data-part": "target"})


def _captions(res: VocabCeResult) -> list[list]:
    """The captions of the figure's steps, as the pieces they wrap at."""
    head = ([label("fig.vc_vocab_pad_1", V=fmt.integer(res.vocab), Vp=fmt.integer(res.padded_vocab),
                   p=fmt.integer(res.shards)), label("fig.vc_vocab_pad_2")] if res.padded_vocab != res.vocab
            else _pieces("fig.vc_vocab", 2, last=fmt.integer(res.vocab - 1), p=fmt.integer(res.shards)))
    return [head, _pieces("fig.vc_logits", 3), [label("fig.vc_local_max")], _pieces("fig.vc_target_term", 2),
            _pieces("fig.vc_sum_exp", 2), _pieces("fig.vc_prob", 2), _pieces("fig.vc_grad", 2)]


def _vocab_ce_drawing(res: VocabCeResult, max_w: float) -> tuple[list[dict], float, float]:
    d = _Drawing(res, max_w)
    d.header()
    d.logits()
    d.reduce_step([label("fig.vc_local_max")], "local_max", label("fig.vc_ar_max", m=fmt.num(res.global_max)),
                  "allreduce-max")
    t = sum(float(e.target_shifted) for e in res.ranks)
    d.reduce_step(_pieces("fig.vc_target_term", 2), "target_shifted", label("fig.vc_ar_t", t=fmt.num(t)), "allreduce-t")
    d.reduce_step(_pieces("fig.vc_sum_exp", 2), "local_sum_exp", label("fig.vc_ar_s", s=fmt.num(res.global_sum_exp)),
                  "allreduce-s")
    d.loss()
    d.probabilities()
    d.gradient()
    return [d.target_column(d.slot_y)] + d.nodes, d.w, d.y + PAD - 10


def figure_vocab_ce(res: VocabCeResult) -> dict:
    """The ``vocab-ce`` figure of one run of :func:`tpmath.vocab_ce.run_vocab_ce` (1-D logits): on a
    desktop every id as wide as its numbers, on a phone as wide as the column allows (numbers that
    no longer fit alternate over two lines)."""
    title = label("fig.vc_title", p=fmt.integer(res.shards), y=fmt.integer(res.target))
    return pair("vocab-ce", title, lambda max_w: _vocab_ce_drawing(res, max_w))


# ---------------------------------------------------------------- vocab-extras

PANEL_W = 340.0         # two panels side by side on a desktop (tree.WIDE_W); one a line on a phone
LOSS_W = 160.0          # the longest loss bar (shorter where the panel is narrower)
BAR_H = 11.0
SLOT_MAX = 40.0
SHARD_GAP = 4.0         # between two ranks' ids
COL_W = 22.0            # one id of a gradient row
GRAD_H = 20.0           # px of the largest |gradient|, up or down from the axis


def _ids(smooth: VocabCeResult, w: float) -> Panel:
    """The ids of the padded vocabulary, tinted by owner (padding dashed), each rank's badge above."""
    V, Vp, tp = smooth.vocab, smooth.padded_vocab, smooth.shards
    slot = min(SLOT_MAX, (w - SHARD_GAP * (tp - 1)) / Vp)
    nodes, x = [], 0.0
    top = BADGE_H + SHARD_GAP
    for e in smooth.ranks:
        a, b = e.vocab_range
        bw = min(BADGE_W, (b - a) * slot)
        nodes += badge(e.rank, x + ((b - a) * slot - bw) / 2, 0, bw, BADGE_H)
        for j in range(a, b):
            nodes += _slot(j, e.rank, j < V, x, top, slot)
            x += slot
        x += SHARD_GAP
    return Panel(x - SHARD_GAP, top + SLOT_H, nodes)


def _padding_panel(smooth: VocabCeResult, gpt2: VocabPad, w: float) -> Panel:
    """The small vocabulary at this tp: ids tinted by owner, padding ids dashed and masked;
    below it, Megatron's rule on GPT-2's vocabulary at the same tp (the padding table's row)."""
    V, Vp, tp = smooth.vocab, smooth.padded_vocab, smooth.shards
    note = _pieces("fig.vx_masked", 3) if Vp != V else _pieces("fig.vx_no_padding", 2)
    return flowed([[note_panel(_pieces("fig.vx_padding", 2, V=fmt.integer(V), Vp=fmt.integer(Vp), p=fmt.integer(tp)),
                               w, "cap")],
                   [_ids(smooth, w)],
                   [note_panel(note, w)],
                   [note_panel(_pieces("fig.vx_gpt2", 2, V=fmt.integer(gpt2.vocab), Vp=fmt.integer(gpt2.padded_vocab),
                                       div=fmt.integer(gpt2.divisor)), w)],
                   [note_panel(_pieces("fig.vx_gpt2_pad", 2, pad=fmt.integer(gpt2.padding),
                                       k=fmt.integer(gpt2.per_rank)), w)]], w, part="padding", min_w=w)


def _grad_row(grad: np.ndarray, owner: dict, unit: float, i: int) -> Panel:
    """One position's gradient over the vocabulary: a bar per id up or down from the axis."""
    mid = GRAD_H
    nodes = [hline(0, len(grad) * COL_W, mid, "axis")]
    for j, g in enumerate(grad.tolist()):
        h = abs(g) * unit
        nodes.append(rect(j * COL_W + 3, mid - h if g >= 0 else mid, COL_W - 6, h, rank_attrs(owner[j], "bar"),
                          **{"data-key": f"ig.{i}.{j}"}))
    return Panel(len(grad) * COL_W, 2 * GRAD_H, nodes)


def _ignore_panel(ign: VocabCeResult, targets: list, ignore_index: int, w: float) -> Panel:
    """Three positions: their gradient over the vocabulary (tinted by owner) and their loss;
    the ignored one contributes neither.  A position's name sits left of its bars where the
    panel has room, above them where it has not."""
    grad = np.asarray(ign.grad)                                   # (N, V)
    owner = {t.token: t.rank for t in ign.tokens if t.position == 0}
    unit = GRAD_H / (float(np.max(np.abs(grad))) or 1.0)          # px per unit of gradient
    names = [label("fig.vx_pos_ignored", i=fmt.integer(i)) if y_i == ignore_index
             else label("fig.vx_pos", i=fmt.integer(i), y=fmt.integer(y_i)) for i, y_i in enumerate(targets)]
    losses = [label("fig.vx_pos_loss", loss=fmt.num(ign.position_loss[i])) for i in range(len(targets))]
    name_w = max(text_w(c) for c in names) + 8
    loss_w = max(text_w(c) for c in losses)
    bars_w = grad.shape[1] * COL_W
    beside = name_w + bars_w + 10 + loss_w <= w
    rows = [[note_panel(_pieces("fig.vx_ignore", 2, index=fmt.integer(ignore_index)), w, "cap")]]
    for i, y_i in enumerate(targets):
        cls = "dimtext" if y_i == ignore_index else "lbl"
        name = Panel(name_w, 2 * GRAD_H, [mid_text(0, GRAD_H, names[i], cls, "start")])
        loss = Panel(loss_w, 2 * GRAD_H, [mid_text(0, GRAD_H, losses[i], cls, "start", **{"data-key": f"iloss.{i}"})])
        bars = _grad_row(grad[i], owner, unit, i)
        rows += [[name, bars, loss]] if beside else [[note_panel(names[i], w, cls)], [bars, loss]]
    rows.append([note_panel(_pieces("fig.vx_ignore_mean", 2, n=fmt.integer(ign.counted), loss=fmt.num(ign.loss)),
                            w, "cap")])
    return flowed(rows, w, part="ignore", min_w=w)


def _smoothing_panel(smooth: VocabCeResult, eps: float, megatron: list, tp1, w: float) -> Panel:
    """Per rank our loss (= PyTorch, the dashed line) and Megatron's, as bars from 0."""
    ours, ref = smooth.loss, smooth.reference_loss
    values = [ours, ref] + [v for v in megatron + [tp1] if v is not None]
    who_w = max(text_w(label(f"fig.vx_{k}"), "op") for k in ("ours", "meg"))
    lead = max(BADGE_W + 6 + who_w, text_w(label("fig.vx_megatron_tp1")) + 6 + who_w) + 8
    num_room = widest(fmt.num(v) for v in values) + 8
    lo, hi = min(0.0, *values), max(0.0, *values)
    unit = min(LOSS_W, w - lead - num_room) / ((hi - lo) or 1.0)
    x0 = lead - lo * unit                                         # where the value 0 sits
    who_x = lead - who_w - 8
    y = REF_H
    bars = []
    rows = [(e.rank, megatron[i]) for i, e in enumerate(smooth.ranks)] + [(None, tp1)]
    for r, meg in rows:
        if r is None:
            bars.append(mid_text(0, y + BAR_H + 1, label("fig.vx_megatron_tp1"), "dimtext", "start"))
            marks = [("meg", meg, None)]
        else:
            bars += badge(r, 0, y + 1, BADGE_W)
            marks = [("ours", ours, r), ("meg", meg, r)]
        for k, (who, v, owner) in enumerate(marks):
            by = y + k * (BAR_H + 3) if r is not None else y + BAR_H / 2 + 1
            bars.append(mid_text(who_x, by + BAR_H / 2, label(f"fig.vx_{who}"), "op", "start"))
            tag = "tp1" if r is None else r
            if v is None:
                bars.append(mid_text(x0 + 4, by + BAR_H / 2, label("label.undefined_k"), "dimtext", "start"))
                continue
            left, bw = (x0, v * unit) if v >= 0 else (x0 + v * unit, -v * unit)
            bars.append(rect(left, by, bw, BAR_H, rank_attrs(owner, "bar" if who == "ours" else "bar alt"),
                             **{"data-key": f"{who}bar.{tag}"}))
            bars.append(mid_text(max(x0 + v * unit, x0) + 4, by + BAR_H / 2, fmt.num(v), "num", "start",
                                 **{"data-key": f"{who}.{tag}"}))
        y += 2 * BAR_H + 12
    ref_x = x0 + ref * unit
    bars += [line(ref_x, REF_H - 8, ref_x, y - 6, "axis ref"),
             text(ref_x, REF_H - 12, label("fig.vx_pytorch", loss=fmt.num(ref)), "op", "middle"),
             line(x0, REF_H - 6, x0, y - 6, "axis")]
    chart = Panel(min(w, x0 + max(hi, 0.0) * unit + num_room), y, bars)
    return flowed([[note_panel(_pieces("fig.vx_smoothing", 2, eps=fmt.num(eps)), w, "cap")], [chart]], w,
                  part="smoothing", min_w=w)


REF_H = 30.0            # room above the smoothing bars for the PyTorch line's label


def figure_vocab_extras(tp: int, eps: float, smooth: VocabCeResult, ign: VocabCeResult, targets: list,
                        ignore_index: int, gpt2: VocabPad) -> dict:
    """The ``vocab-extras`` figure: padding at this tp (``gpt2``: the padding table's row for
    GPT-2), the ignored position of ``ign``, label smoothing per rank of ``smooth``.  Its panels
    are drawn for the width they get: two a line on a desktop, one on a phone."""
    # As the table: Megatron's loss on the same logits (K = its padded width, padded logits unmasked).
    megatron, tp1 = list(smooth.megatron.loss_per_rank), smooth.megatron.loss_tp1

    def draw(max_w: float):
        w = min(PANEL_W, max_w - 2 * PAD)
        return flow([[_padding_panel(smooth, gpt2, w), _ignore_panel(ign, targets, ignore_index, w)],
                     [_smoothing_panel(smooth, eps, megatron, tp1, min(2 * PANEL_W + 10, max_w - 2 * PAD))]], max_w)
    title = label("fig.vx_title", p=fmt.integer(tp), eps=fmt.num(eps))
    return pair("vocab-extras", title, draw)
