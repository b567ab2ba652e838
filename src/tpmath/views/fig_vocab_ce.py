"""Figures of vocabulary-parallel cross-entropy (page 1, sections ``vocab-ce`` and ``vocab-extras``).

``vocab-ce``: one column per vocabulary id, grouped by the rank that owns it, read top to
bottom in the order Megatron computes: the shards (padding dashed), the logits, each rank's
maximum and the AllReduce(MAX), the target term and its AllReduce(SUM), the local Σ exp and
its AllReduce(SUM), the loss, then the probability and gradient of every id, computed
locally.  The target's column is lit all the way down.  The logits hang from the line of
the global maximum m: the drawing is the same for every shift, only the labels change.

Every number is a string of the section's tables (same core result, same :mod:`fmt` call).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import fmt
from ..vocab_ce import VocabCeResult, VocabPad
from .draw import (CAP_H, PAD, Panel, band, badge, down_arrow, figure, hline, label, line, rank_attrs, rect,
                   single, text, widest, wrapped)

PAD_W = 16.0            # a padding id: no number to show, only its id
GAP = 8.0               # between two ranks' groups
MIN_W = 330.0           # room for the captions
HANG_H = 46.0           # the longest logit bar (m − min zⱼ)
PROB_H = 60.0           # px per unit of probability and gradient
BOX_H = 20.0
BAND_H = 24.0
_SUB = "₀₁₂₃₄₅₆₇₈₉"


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


def _slots(res: VocabCeResult) -> tuple[list[Slot], list[tuple[float, float]], float, bool]:
    """Columns of every id, (x, width) of every rank's group, the width of the content and
    whether the logit labels need two staggered rows."""
    V = res.vocab
    logits = [fmt.num(t) for t in _real_logits(res)]
    labels = [fmt.num(t.prob) for t in res.tokens] + [fmt.num(t.grad) for t in res.tokens]
    # A logit label wider than its slot goes on a second row (staggered), so it may span two.
    slot_w = max(44.0, widest(labels) + 6, (widest(logits) + 8) / 2)
    slots, groups, x = [], [], PAD
    for e in res.ranks:
        a, b = e.vocab_range
        # mᵣ is also the bold logit above, so its box may fall back to the symbol (see reduce_step).
        stats = [fmt.num(getattr(e, k)) for k in ("target_shifted", "local_sum_exp")]
        inner = sum(slot_w if j < V else PAD_W for j in range(a, b))
        gw = max(inner, widest(stats) + 8)
        sx = x + (gw - inner) / 2
        for j in range(a, b):
            w = slot_w if j < V else PAD_W
            slots.append(Slot(j, e.rank, sx, w, j < V))
            sx += w
        groups.append((x, gw))
        x += gw + GAP
    return slots, groups, x - GAP - PAD, widest(logits) + 4 > slot_w


def _real_logits(res: VocabCeResult) -> list[float]:
    """zⱼ of the real ids 0 … V−1 (the ranks' logits without their padding)."""
    out = []
    for e in res.ranks:
        a, b = e.vocab_range
        out += [float(v) for j, v in zip(range(a, b), np.atleast_1d(e.logits)) if j < res.vocab]
    return out


def _caption(y: float, cell) -> dict:
    return text(PAD, y + 11, cell, "cap")


class _Drawing:
    """A cursor down the page of the figure: each step appends its shapes below the last."""

    def __init__(self, res: VocabCeResult):
        self.res = res
        self.slots, self.groups, self.content_w, self.stagger = _slots(res)
        self.w = max(self.content_w + 12, MIN_W) + 2 * PAD        # 12: the label m right of its line
        self.y = PAD
        self.nodes: list[dict] = []
        self.m = float(res.global_max)

    def add(self, *nodes):
        self.nodes.extend(nodes)

    def header(self) -> None:
        res = self.res
        if res.padded_vocab != res.vocab:
            cap, lines = wrapped(PAD, self.y + 11, [label("fig.vc_vocab_pad_1", V=fmt.integer(res.vocab),
                                                          Vp=fmt.integer(res.padded_vocab), p=fmt.integer(res.shards)),
                                                    label("fig.vc_vocab_pad_2")], self.w - 2 * PAD, "cap")
            self.add(cap)
            self.y += (lines - 1) * 15
        else:
            self.add(_caption(self.y, label("fig.vc_vocab", last=fmt.integer(res.vocab - 1), p=fmt.integer(res.shards))))
        self.y += CAP_H + 2
        for e, (gx, gw) in zip(res.ranks, self.groups):
            bw = min(34.0, gw)
            self.add(*badge(e.rank, gx + (gw - bw) / 2, self.y, bw))
        self.y += 24
        self.slot_y = self.y
        for s in self.slots:
            cls = "slot" if s.real else "slot pad"
            self.add(rect(s.x, self.y, s.w, 22, rank_attrs(s.rank, cls), **{"data-key": f"slot.{s.j}"}),
                     text(s.cx, self.y + 11, fmt.integer(s.j), "idx" if s.real else "idx dimtext", "middle",
                          **{"dominant-baseline": "central"}))
        self.y += 22
        tgt = self.target_slot()
        self.add(text(tgt.cx, self.y + 11, label("fig.vc_target"), "op", "middle"))
        self.y += 18

    def target_slot(self) -> Slot:
        return next(s for s in self.slots if s.j == self.res.target)

    def logits(self) -> None:
        """The logits as numbers under their ids (each rank's maximum bold), then as bars hanging
        from the line of the global maximum m by m − zⱼ."""
        self.add(_caption(self.y, label("fig.vc_logits")))
        self.y += CAP_H + 2
        z = dict(enumerate(self._logit_values()))               # real ids are 0 … V−1, in order
        local_max = {e.rank: float(e.local_max) for e in self.res.ranks}
        real = [s for s in self.slots if s.real]
        rows = 2 if self.stagger else 1
        for i, s in enumerate(real):
            cls = "num em" if z[s.j] == local_max[s.rank] else "num"
            self.add(text(s.cx, self.y + 11 + 14 * (i % rows), fmt.num(z[s.j]), cls, "middle",
                          **{"data-key": f"z.{s.j}"}))
        for e, (gx, gw) in zip(self.res.ranks, self.groups):
            pads = [s for s in self.slots if s.rank == e.rank and not s.real]
            if pads:     # masked to −∞: one label for the rank's padding ids
                cx = (pads[0].x + pads[-1].x + pads[-1].w) / 2
                self.add(text(cx, self.y + 11, "−∞", "num dimtext", "middle", **{"data-key": f"zpad.{e.rank}"}))
        self.y += 14 * rows + 6
        top = self.y
        depth = max(self.m - v for v in z.values()) or 1.0
        unit = HANG_H / depth
        self.add(hline(PAD, PAD + self.content_w, top, "axis"),
                 text(PAD + self.content_w + 4, top, "m", "op", **{"dominant-baseline": "central"}))
        for s in real:
            self.add(rect(s.x + 6, top, s.w - 12, (self.m - z[s.j]) * unit, rank_attrs(s.rank, "bar"),
                          **{"data-key": f"zbar.{s.j}"}))
        self.y = top + HANG_H + 10

    def _logit_values(self) -> list[float]:
        return _real_logits(self.res)

    def reduce_step(self, caption, stat: str, result, part: str) -> None:
        """Per rank one number, arrows into the AllReduce band, the band with the result."""
        self.add(_caption(self.y, caption))
        self.y += CAP_H + 2
        for e, (gx, gw) in zip(self.res.ranks, self.groups):
            r = e.rank
            value = fmt.num(getattr(e, stat))
            self.add(rect(gx + 2, self.y, gw - 4, BOX_H, rank_attrs(r, "box"), rx="3"))
            if widest([value]) + 6 <= gw:
                self.add(text(gx + gw / 2, self.y + BOX_H / 2, value, "num", "middle",
                              **{"dominant-baseline": "central", "data-key": f"{stat}.{r}"}))
            else:        # only mᵣ can be too wide: its value is the bold logit just above
                self.add(text(gx + gw / 2, self.y + BOX_H / 2, "m" + _SUB[r], "op", "middle",
                              **{"dominant-baseline": "central"}))
            self.add(*down_arrow(gx + gw / 2, self.y + BOX_H, self.y + BOX_H + 12))
        self.y += BOX_H + 12
        self.add(band(PAD, self.y, self.content_w, BAND_H, result, part=part))
        self.y += BAND_H + 10

    def loss(self) -> None:
        res = self.res
        self.add(text(PAD + self.content_w / 2, self.y + 10, label("fig.vc_loss", loss=fmt.num(res.loss)),
                      "stage-name", "middle", **{"dominant-baseline": "central"}))
        self.y += 30

    def probabilities(self) -> None:
        """pⱼ as bars up from a baseline (PROB_H px per unit), the number above; padding: nothing."""
        self.add(_caption(self.y, label("fig.vc_prob")))
        probs = {t.token: float(t.prob) for t in self.res.tokens}
        top_p = max(probs.values())
        base = self.y + CAP_H + 16 + top_p * PROB_H
        self.add(hline(PAD, PAD + self.content_w, base, "axis"))
        for s in self.slots:
            if not s.real:
                continue
            h = probs[s.j] * PROB_H
            self.add(rect(s.x + 6, base - h, s.w - 12, h, rank_attrs(s.rank, "bar"), **{"data-key": f"pbar.{s.j}"}),
                     text(s.cx, base - h - 4, fmt.num(probs[s.j]), "num", "middle", **{"data-key": f"p.{s.j}"}))
        self.y = base + 10

    def gradient(self) -> None:
        """∂L/∂zⱼ on the same scale as pⱼ: the target's bar is pulled down by exactly 1."""
        self.add(_caption(self.y, label("fig.vc_grad")))
        grads = {t.token: float(t.grad) for t in self.res.tokens}
        up = max(max(grads.values()), 0.0) * PROB_H
        down = max(-min(grads.values()), 0.0) * PROB_H
        zero = self.y + CAP_H + 16 + up
        self.add(hline(PAD, PAD + self.content_w, zero, "axis"))
        for s in self.slots:
            if not s.real:
                continue
            g = grads[s.j]
            h = abs(g) * PROB_H
            y0 = zero - h if g >= 0 else zero
            label_y = zero - h - 4 if g >= 0 else zero + h + 12
            self.add(rect(s.x + 6, y0, s.w - 12, h, rank_attrs(s.rank, "bar"), **{"data-key": f"gbar.{s.j}"}),
                     text(s.cx, label_y, fmt.num(g), "num", "middle", **{"data-key": f"g.{s.j}"}))
        self.y = zero + down + 18

    def target_column(self, top: float) -> dict:
        """The target's column lit from its slot to the bottom (drawn first, behind everything)."""
        s = self.target_slot()
        return rect(s.x, top, s.w, self.y - top, {"class": "tgt"}, **{"data-part": "target"})


def figure_vocab_ce(res: VocabCeResult) -> dict:
    """The ``vocab-ce`` figure of one run of :func:`tpmath.vocab_ce.run_vocab_ce` (1-D logits)."""
    d = _Drawing(res)
    d.header()
    d.logits()
    d.reduce_step(label("fig.vc_local_max"), "local_max", label("fig.vc_ar_max", m=fmt.num(res.global_max)), "allreduce-max")
    t = sum(float(e.target_shifted) for e in res.ranks)
    d.reduce_step(label("fig.vc_target_term"), "target_shifted", label("fig.vc_ar_t", t=fmt.num(t)), "allreduce-t")
    d.reduce_step(label("fig.vc_sum_exp"), "local_sum_exp", label("fig.vc_ar_s", s=fmt.num(res.global_sum_exp)),
                  "allreduce-s")
    d.loss()
    d.probabilities()
    d.gradient()
    nodes = [d.target_column(d.slot_y)] + d.nodes
    title = label("fig.vc_title", p=fmt.integer(res.shards), y=fmt.integer(res.target))
    return single("vocab-ce", title, nodes, d.w, d.y + PAD - 10)


# ---------------------------------------------------------------- vocab-extras

PANEL_W = 340.0         # two panels side by side on a desktop (tree.WIDE_W), one on a phone
LOSS_W = 160.0          # the longest loss bar
BAR_H = 11.0


def _heading(cell) -> dict:
    return text(0, 12, cell, "cap")


def _padding_panel(smooth: VocabCeResult, gpt2: VocabPad) -> Panel:
    """The small vocabulary at this tp: ids tinted by owner, padding ids dashed and masked;
    below it, Megatron's rule on GPT-2's vocabulary at the same tp (the padding table's row)."""
    V, Vp, tp = smooth.vocab, smooth.padded_vocab, smooth.shards
    slot = min(40.0, (PANEL_W - 4 * (tp - 1)) / Vp)
    nodes = [_heading(label("fig.vx_padding", V=fmt.integer(V), Vp=fmt.integer(Vp), p=fmt.integer(tp)))]
    x = 0.0
    for e in smooth.ranks:
        a, b = e.vocab_range
        bw = min(34.0, (b - a) * slot)
        nodes += badge(e.rank, x + ((b - a) * slot - bw) / 2, 22, bw)
        for j in range(a, b):
            cls = "slot" if j < V else "slot pad"
            nodes += [rect(x, 46, slot, 22, rank_attrs(e.rank, cls), **{"data-key": f"slot.{j}"}),
                      text(x + slot / 2, 57, fmt.integer(j), "idx" if j < V else "idx dimtext", "middle",
                           **{"dominant-baseline": "central"})]
            x += slot
        x += 4
    note = label("fig.vx_masked") if Vp != V else label("fig.vx_no_padding")
    nodes.append(text(0, 86, note, "dimtext"))
    nodes.append(text(0, 108, label("fig.vx_gpt2", V=fmt.integer(gpt2.vocab), Vp=fmt.integer(gpt2.padded_vocab),
                                  div=fmt.integer(gpt2.divisor)), "dimtext"))
    nodes.append(text(0, 124, label("fig.vx_gpt2_pad", pad=fmt.integer(gpt2.padding), k=fmt.integer(gpt2.per_rank)),
                      "dimtext"))
    return Panel(PANEL_W, 130, nodes, part="padding")


def _ignore_panel(ign: VocabCeResult, targets: list, ignore_index: int) -> Panel:
    """Three positions: their gradient over the vocabulary (tinted by owner) and their loss;
    the ignored one contributes neither."""
    grad = np.asarray(ign.grad)                                   # (N, V)
    owner = {t.token: t.rank for t in ign.tokens if t.position == 0}
    V = grad.shape[1]
    unit = 20.0 / (float(np.max(np.abs(grad))) or 1.0)               # px per unit of gradient
    col = 22.0
    nodes = [_heading(label("fig.vx_ignore", index=fmt.integer(ignore_index)))]
    y = 24.0
    for i, y_i in enumerate(targets):
        ignored = y_i == ignore_index
        mid = y + 22
        name = label("fig.vx_pos_ignored", i=fmt.integer(i)) if ignored else label("fig.vx_pos", i=fmt.integer(i),
                                                                             y=fmt.integer(y_i))
        nodes.append(text(0, mid, name, "dimtext" if ignored else "lbl", **{"dominant-baseline": "central"}))
        x0 = 104.0
        nodes.append(hline(x0, x0 + V * col, mid, "axis"))
        for j in range(V):
            g = float(grad[i, j])
            h = abs(g) * unit
            nodes.append(rect(x0 + j * col + 3, mid - h if g >= 0 else mid, col - 6, h,
                              rank_attrs(owner[j], "bar"), **{"data-key": f"ig.{i}.{j}"}))
        loss = fmt.num(ign.position_loss[i])
        nodes.append(text(x0 + V * col + 10, mid, label("fig.vx_pos_loss", loss=loss), "dimtext" if ignored else "lbl",
                          **{"dominant-baseline": "central", "data-key": f"iloss.{i}"}))
        y += 46
    nodes.append(text(0, y + 10, label("fig.vx_ignore_mean", n=fmt.integer(ign.counted), loss=fmt.num(ign.loss)),
                      "cap"))
    return Panel(PANEL_W, y + 16, nodes, part="ignore")


def _smoothing_panel(smooth: VocabCeResult, eps: float, megatron: list, tp1) -> Panel:
    """Per rank our loss (= PyTorch, the dashed line) and Megatron's, as bars from 0."""
    ours, ref = smooth.loss, smooth.reference_loss
    values = [ours, ref] + [v for v in megatron + [tp1] if v is not None]
    lo, hi = min(0.0, *values), max(0.0, *values)
    unit = LOSS_W / ((hi - lo) or 1.0)
    x0 = 116.0 - lo * unit                                            # where the value 0 sits
    nodes = [_heading(label("fig.vx_smoothing", eps=fmt.num(eps)))]
    y = 38.0
    rows = [(e.rank, megatron[i]) for i, e in enumerate(smooth.ranks)] + [(None, tp1)]
    for r, meg in rows:
        if r is None:
            nodes.append(text(0, y + BAR_H + 1, label("fig.vx_megatron_tp1"), "dimtext", **{"dominant-baseline": "central"}))
            bars = [("meg", meg, None)]
        else:
            nodes += badge(r, 0, y + 1, 34)
            bars = [("ours", ours, r), ("meg", meg, r)]
        for k, (who, v, owner) in enumerate(bars):
            by = y + k * (BAR_H + 3) if r is not None else y + BAR_H / 2 + 1
            nodes.append(text(40, by + BAR_H / 2, label(f"fig.vx_{who}"), "op", **{"dominant-baseline": "central"}))
            if v is None:
                nodes.append(text(x0 + 4, by + BAR_H / 2, label("label.undefined_k"), "dimtext",
                                  **{"dominant-baseline": "central"}))
                continue
            left, w = (x0, v * unit) if v >= 0 else (x0 + v * unit, -v * unit)
            cls = "bar" if who == "ours" else "bar alt"
            nodes.append(rect(left, by, w, BAR_H, rank_attrs(owner, cls),
                              **{"data-key": f"{who}bar.{'tp1' if r is None else r}"}))
            nodes.append(text(max(x0 + v * unit, x0) + 4, by + BAR_H / 2, fmt.num(v), "num",
                              **{"dominant-baseline": "central", "data-key": f"{who}.{'tp1' if r is None else r}"}))
        y += 2 * BAR_H + 12
    ref_x = x0 + ref * unit
    nodes.append(line(ref_x, 30, ref_x, y - 6, "axis ref"))
    nodes.append(text(ref_x, 26, label("fig.vx_pytorch", loss=fmt.num(ref)), "op", "middle"))
    nodes.append(line(x0, 32, x0, y - 6, "axis"))
    return Panel(PANEL_W, y, nodes, part="smoothing")


def figure_vocab_extras(tp: int, eps: float, smooth: VocabCeResult, ign: VocabCeResult, targets: list,
                        ignore_index: int, gpt2: VocabPad) -> dict:
    """The ``vocab-extras`` figure: padding at this tp (``gpt2``: the padding table's row for
    GPT-2), the ignored position of ``ign``, label smoothing per rank of ``smooth``."""
    # As the table: Megatron's loss on the same logits (K = its padded width, padded logits unmasked).
    megatron, tp1 = list(smooth.megatron.loss_per_rank), smooth.megatron.loss_tp1

    def rows():
        return [[_padding_panel(smooth, gpt2), _ignore_panel(ign, targets, ignore_index)],
                [_smoothing_panel(smooth, eps, megatron, tp1)]]
    title = label("fig.vx_title", p=fmt.integer(tp), eps=fmt.num(eps))
    return figure("vocab-extras", title, rows)
