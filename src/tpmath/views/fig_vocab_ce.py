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
from .draw import (PAD, Col, HBar, Panel, alternate, band_panel, centred, col_badges, col_bars, col_boxes, col_groups,
                   col_texts, column, figure_at, flowed, hbars, label, lit_column, note_panel, span, text_w, widest,
                   words)

PAD_W = 16.0            # a padding id: no number to show, only its id
GAP = 8.0               # between two ranks' groups
MIN_W = 330.0           # room for the captions on a desktop
M_W = 12.0              # the name m right of the line of the global maximum
HANG_H = 46.0           # the longest logit bar (m − min zⱼ)
PROB_H = 60.0           # px per unit of probability and gradient
SLOT_H = 22.0           # a vocabulary id
STEP_GAP = 10.0         # between two steps
_SUB = "₀₁₂₃₄₅₆₇₈₉"


@dataclass
class Layout:
    """The columns of the ids (``ids[k]``: the id of column k) and of the ranks' groups, and
    which rows of numbers need two lines (a number wider than its column alternates up and down
    with its neighbours')."""

    ids: list
    cols: list
    groups: list
    stagger_logits: bool
    stagger_labels: bool     # the probabilities and gradients
    box_w: float             # a rank's box in the AllReduce steps
    stagger_boxes: bool      # boxes wider than their group: even ranks on one line, odd on the next

    def real(self, vocab: int) -> tuple[list, list]:
        """The real ids (0 … V−1, in order) and their columns."""
        pairs = [(j, c) for j, c in zip(self.ids, self.cols) if j < vocab]
        return [j for j, _ in pairs], [c for _, c in pairs]


def _pieces(key: str, count: int, **args) -> list:
    """The pieces of a caption that wraps (``<lang>.figwrap.toml``: key_1 … key_n)."""
    return [label(f"{key}_{i}", **args) for i in range(1, count + 1)]


def _slot_row(ids: list, cols: list, vocab: int, key: str = "slot") -> Panel:
    """Every id in its box, tinted by its owner (dashed: padding); ``key``: the boxes' data-key prefix."""
    return col_boxes(cols, [(fmt.integer(j), "idx" if j < vocab else "idx dimtext", None) for j in ids],
                     ["slot" if j < vocab else "slot pad" for j in ids], keys=[f"{key}.{j}" for j in ids], h=SLOT_H)


def _slots(res: VocabCeResult, avail: float) -> Layout:
    """Columns of every id and of every rank's group in at most ``avail`` px: on a desktop as wide
    as their numbers, on a phone as wide as the column allows."""
    V, Vp = res.vocab, res.padded_vocab
    logits = [fmt.num(t) for t in _real_logits(res)]
    labels = [fmt.num(t.prob) for t in res.tokens] + [fmt.num(t.grad) for t in res.tokens]
    # mᵣ is also the bold logit above, so its box may fall back to the symbol (see _reduce).
    stats = [fmt.num(getattr(e, k)) for e in res.ranks for k in ("target_shifted", "local_sum_exp")]
    box_w = widest(stats) + 8
    natural = max(44.0, widest(labels) + 6, (widest(logits) + 8) / 2)
    slot_w = min(natural, (avail - GAP * (res.shards - 1) - PAD_W * (Vp - V)) / V)
    widths = [[slot_w if j < V else PAD_W for j in range(*e.vocab_range)] for e in res.ranks]
    roomy = sum(max(sum(w), box_w) for w in widths) + GAP * (res.shards - 1) <= avail
    cols, groups = col_groups(widths, [e.rank for e in res.ranks], GAP, box_w if roomy else 0.0)
    return Layout([j for e in res.ranks for j in range(*e.vocab_range)], [c for run in cols for c in run], groups,
                  widest(logits) + 4 > slot_w, widest(labels) + 4 > slot_w, box_w, not roomy)


def _real_logits(res: VocabCeResult) -> list[float]:
    """zⱼ of the real ids 0 … V−1 (the ranks' logits without their padding)."""
    out = []
    for e in res.ranks:
        a, b = e.vocab_range
        out += [float(v) for j, v in zip(range(a, b), np.atleast_1d(e.logits)) if j < res.vocab]
    return out


def _captions(res: VocabCeResult) -> list[list]:
    """The captions of the figure's steps, as the pieces they wrap at."""
    head = ([label("fig.vc_vocab_pad_1", V=fmt.integer(res.vocab), Vp=fmt.integer(res.padded_vocab),
                   p=fmt.integer(res.shards)), label("fig.vc_vocab_pad_2")] if res.padded_vocab != res.vocab
            else _pieces("fig.vc_vocab", 2, last=fmt.integer(res.vocab - 1), p=fmt.integer(res.shards)))
    return [head, _pieces("fig.vc_logits", 3), [label("fig.vc_local_max")], _pieces("fig.vc_target_term", 2),
            _pieces("fig.vc_sum_exp", 2), _pieces("fig.vc_prob", 2), _pieces("fig.vc_grad", 2)]


class _Steps:
    """The figure's steps, top to bottom, each a block of rows of the same columns, at most
    ``max_w`` wide."""

    def __init__(self, res: VocabCeResult, max_w: float):
        self.res = res
        self.lay = lay = _slots(res, max_w - 2 * PAD - M_W)
        self.real, self.real_cols = lay.real(res.vocab)
        self.content_w = span(lay.cols).w
        # on a desktop as wide as the widest caption, so that none wraps (pieces add up: an estimate
        # per character)
        self.captions = _captions(res)
        longest = max(sum(text_w(p, "cap") for p in pieces) for pieces in self.captions) + 1     # + rounding
        self.w = min(max(self.content_w + M_W, MIN_W, longest), max_w - 2 * PAD)
        # a number at an id on either edge is kept inside the drawing (its margin included)
        self.room = (1 - PAD, self.w + PAD - 1)

    def caption(self, pieces: list) -> Panel:
        return words(pieces, self.w, "cap")

    def numbers(self, values: list, key: str, stagger: bool, cls=None) -> Panel:
        """One number per real id, on one line or alternating over two."""
        return col_texts(self.real_cols, [(fmt.num(v), cls(j, v) if cls else "num", f"{key}.{j}")
                                          for j, v in zip(self.real, values)], self.room,
                         alternate(len(values), stagger))

    def logits(self) -> list:
        """The logits as numbers under their ids (each rank's maximum bold), then as bars hanging
        from the line of the global maximum m by m − zⱼ."""
        z = _real_logits(self.res)                                  # real ids are 0 … V−1, in order
        local_max = {e.rank: float(e.local_max) for e in self.res.ranks}
        owner = {j: c.rank for j, c in zip(self.real, self.real_cols)}
        cols, cells = list(self.real_cols), [(fmt.num(v), "num em" if v == local_max[owner[j]] else "num", f"z.{j}")
                                             for j, v in zip(self.real, z)]
        lines = alternate(len(z), self.lay.stagger_logits)
        for e in self.res.ranks:          # masked to −∞: one label for the rank's padding ids
            pads = [c for j, c in zip(self.lay.ids, self.lay.cols) if c.rank == e.rank and j >= self.res.vocab]
            if pads:
                cols.append(span(pads))
                cells.append(("−∞", "num dimtext", f"zpad.{e.rank}"))
                lines.append(0)
        m = float(self.res.global_max)
        depth = max(m - v for v in z) or 1.0
        return [self.caption(self.captions[1]), col_texts(cols, cells, self.room, lines),
                col_bars(self.real_cols, [v - m for v in z], HANG_H / depth, [f"zbar.{j}" for j in self.real],
                         axis_name="m", extent=(-depth, 0.0), width=self.content_w)]

    def reduce(self, caption: list, stat: str, result, part: str) -> list:
        """Per rank one number, arrows into the AllReduce band, the band with the result."""
        two = self.lay.stagger_boxes and self.res.shards > 1
        # on two lines a box may reach into its neighbours' groups (theirs are on the other line)
        bw = min(self.lay.box_w, 2 * min(g.w for g in self.lay.groups) + GAP - 4)
        cells = []
        for e, g in zip(self.res.ranks, self.lay.groups):
            value = fmt.num(getattr(e, stat))
            if widest([value]) + 6 <= (bw if two else g.w - 4):
                cells.append((value, "num", f"{stat}.{e.rank}"))
            else:        # only mᵣ can be too wide: its value is the bold logit just above
                cells.append(("m" + _SUB[e.rank], "op", None))
        return [self.caption(caption),
                col_boxes(self.lay.groups, cells, w=bw if two else None, inset=4, stagger=two, arrow=True, rx="3"),
                band_panel(result, self.content_w, part)]

    def loss(self) -> Panel:
        return col_texts([span(self.lay.cols)], [(label("fig.vc_loss", loss=fmt.num(self.res.loss)), "stage-name",
                                                  None)])

    def chart(self, caption: list, values: list, key: str, bar_key: str) -> list:
        """Bars up (or down) from an axis, :data:`PROB_H` px per unit; their numbers at their ends
        where they fit, else in two alternating lines above the chart."""
        over = self.lay.stagger_labels
        ends = None if over else [(fmt.num(v), "num", f"{key}.{j}") for j, v in zip(self.real, values)]
        bars = col_bars(self.real_cols, values, PROB_H, [f"{bar_key}.{j}" for j in self.real], ends,
                        room=self.room, width=self.content_w)
        return [self.caption(caption)] + ([self.numbers(values, key, True)] if over else []) + [bars]

    def blocks(self) -> list:
        res = self.res
        lay = self.lay
        tgt = lay.cols[lay.ids.index(res.target)]
        head = [self.caption(self.captions[0]), col_badges(lay.groups)]
        t = sum(float(e.target_shifted) for e in res.ranks)
        steps = [[_slot_row(lay.ids, lay.cols, res.vocab), col_texts([tgt], [(label("fig.vc_target"), "op", None)],
                                                                     (0.0, self.w))],
                 self.logits(),
                 self.reduce(self.captions[2], "local_max", label("fig.vc_ar_max", m=fmt.num(res.global_max)),
                             "allreduce-max"),
                 self.reduce(self.captions[3], "target_shifted", label("fig.vc_ar_t", t=fmt.num(t)), "allreduce-t"),
                 self.reduce(self.captions[4], "local_sum_exp", label("fig.vc_ar_s", s=fmt.num(res.global_sum_exp)),
                             "allreduce-s"),
                 [self.loss()],
                 self.chart(self.captions[5], [float(tk.prob) for tk in res.tokens], "p", "pbar"),
                 self.chart(self.captions[6], [float(tk.grad) for tk in res.tokens], "g", "gbar")]
        body = column([column(step) for step in steps], gap=STEP_GAP)
        # the target's column lit from its id to the bottom, behind everything
        return [[column(head + [lit_column(body, tgt, "target")])]]


def figure_vocab_ce(res: VocabCeResult) -> dict:
    """The ``vocab-ce`` figure of one run of :func:`tpmath.vocab_ce.run_vocab_ce` (1-D logits): on a
    desktop every id as wide as its numbers, on a phone as wide as the column allows (numbers that
    no longer fit alternate over two lines)."""
    title = label("fig.vc_title", p=fmt.integer(res.shards), y=fmt.integer(res.target))
    return figure_at("vocab-ce", title, lambda max_w: _Steps(res, max_w).blocks())


# ---------------------------------------------------------------- vocab-extras

PANEL_W = 340.0         # two panels side by side on a desktop (tree.WIDE_W); one a line on a phone
LOSS_W = 160.0          # the longest loss bar (shorter where the panel is narrower)
SLOT_MAX = 40.0
SHARD_GAP = 4.0         # between two ranks' ids
COL_W = 22.0            # one id of a gradient row
GRAD_H = 20.0           # px of the largest |gradient|, up or down from the axis


def _id_cols(smooth: VocabCeResult, w: float) -> tuple[list, list]:
    """The columns of the padded vocabulary's ids in ``w`` px (in id order) and the ranks' groups."""
    Vp, tp = smooth.padded_vocab, smooth.shards
    slot = min(SLOT_MAX, (w - SHARD_GAP * (tp - 1)) / Vp)
    cols, groups = col_groups([[slot] * (b - a) for a, b in (e.vocab_range for e in smooth.ranks)],
                              [e.rank for e in smooth.ranks], SHARD_GAP)
    return [c for run in cols for c in run], groups


def _ids(smooth: VocabCeResult, w: float, key: str = "slot") -> Panel:
    """The ids of the padded vocabulary, tinted by owner (padding dashed), each rank's badge above."""
    cols, groups = _id_cols(smooth, w)
    ids = [j for e in smooth.ranks for j in range(*e.vocab_range)]
    return column([col_badges(groups), _slot_row(ids, cols, smooth.vocab, key)], gap=SHARD_GAP)


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
    cols = [Col(j * COL_W, COL_W, owner[j]) for j in range(len(grad))]
    top = GRAD_H / unit
    return col_bars(cols, grad.tolist(), unit, [f"ig.{i}.{j}" for j in range(len(grad))], inset=3, extent=(-top, top))


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
    name_w = max(text_w(c) for c in names) + GAP
    loss_w = max(text_w(c) for c in losses)
    bars = [_grad_row(grad[i], owner, unit, i) for i in range(len(targets))]
    beside = name_w + bars[0].w + 10 + loss_w <= w
    rows = [[note_panel(_pieces("fig.vx_ignore", 2, index=fmt.integer(ignore_index)), w, "cap")]]
    for i, y_i in enumerate(targets):
        cls = "dimtext" if y_i == ignore_index else "lbl"
        loss = centred(losses[i], bars[i].h, cls, f"iloss.{i}", loss_w)
        rows += [[centred(names[i], bars[i].h, cls, w=name_w), bars[i], loss]] if beside else \
            [[note_panel(names[i], w, cls)], [bars[i], loss]]
    rows.append([note_panel(_pieces("fig.vx_ignore_mean", 2, n=fmt.integer(ign.counted), loss=fmt.num(ign.loss)),
                            w, "cap")])
    return flowed(rows, w, part="ignore", min_w=w)


def _rank_boxes(groups: list, values: list, key: str) -> Panel:
    """One number per rank on its group (every other one a line lower where a group is narrower)."""
    cells = [(fmt.num(v), "num", f"{key}.{i}") for i, v in enumerate(values)]
    box_w = widest(c[0] for c in cells) + 8
    return col_boxes(groups, cells, stagger=box_w > min(g.w for g in groups), w=box_w)


def _summed(smooth: VocabCeResult, terms: dict, w: float) -> list:
    """What each rank adds up for the smoothing term: Megatron's log p of its K columns (padding
    included, bars down from 0) and their mean, which no collective joins; ours, Σ (z − m) of its
    real ids, joined by an AllReduce(SUM) into the whole vocabulary's (without smoothing: none)."""
    cols, groups = _id_cols(smooth, w)
    unit = HANG_H / (max(-v for v in terms["log_p"]) or 1.0)
    rows = [[_ids(smooth, w, "sslot")],
            [note_panel(_pieces("fig.vx_meg_terms", 3), w, "cap")],
            [col_bars(cols, terms["log_p"], unit, [f"logp.{j}" for j in range(len(cols))], inset=3)],
            [_rank_boxes(groups, terms["means"], "megmean")],
            [note_panel(_pieces("fig.vx_meg_local", 4), w, "op")]]
    if terms["total"] is not None:
        whole = span(groups)
        rows += [[note_panel(_pieces("fig.vx_our_terms", 3), w, "cap")],
                 [_rank_boxes(groups, terms["sums"], "oursum")],
                 [band_panel(label("fig.vx_our_allreduce", total=fmt.num(terms["total"])), whole.x + whole.w,
                             "smooth-allreduce")],
                 [note_panel(_pieces("fig.vx_our_global", 4), w, "op")]]
    return rows


def _smoothing_panel(smooth: VocabCeResult, eps: float, megatron: list, tp1, terms: dict, w: float) -> Panel:
    """Per rank our loss (= PyTorch, the dashed line) and Megatron's, as bars from 0."""
    ours, meg = label("fig.vx_ours"), label("fig.vx_meg")
    undefined = label("label.undefined_k")
    rows = [(e.rank, [HBar(ours, smooth.loss, e.rank, "bar", "ours", str(e.rank)),
                      HBar(meg, megatron[i], e.rank, "bar alt", "meg", str(e.rank), undefined)])
            for i, e in enumerate(smooth.ranks)]
    rows.append((label("fig.vx_megatron_tp1"), [HBar(meg, tp1, None, "bar alt", "meg", "tp1", undefined)]))
    chart = hbars(rows, w, LOSS_W, ref=(smooth.reference_loss,
                                        label("fig.vx_pytorch", loss=fmt.num(smooth.reference_loss))))
    return flowed([[note_panel(_pieces("fig.vx_smoothing", 2, eps=fmt.num(eps)), w, "cap")], *_summed(smooth, terms, w),
                   [note_panel(_pieces("fig.vx_losses", 2), w, "cap")], [chart]], w, part="smoothing", min_w=w)


def figure_vocab_extras(tp: int, eps: float, smooth: VocabCeResult, ign: VocabCeResult, targets: list,
                        ignore_index: int, gpt2: VocabPad, terms: dict) -> dict:
    """The ``vocab-extras`` figure: padding at this tp (``gpt2``: the padding table's row for
    GPT-2), the ignored position of ``ign``, label smoothing per rank of ``smooth`` (``terms``: what
    each rank adds up, :func:`tpmath.views.vocab_ce.smoothing_terms`).  Its panels
    are drawn for the width they get: two a line on a desktop, one on a phone."""
    # As the table: Megatron's loss on the same logits (K = its padded width, padded logits unmasked).
    megatron, tp1 = list(smooth.megatron.loss_per_rank), smooth.megatron.loss_tp1

    def rows(max_w: float) -> list:
        w = min(PANEL_W, max_w - 2 * PAD)
        return [[_padding_panel(smooth, gpt2, w), _ignore_panel(ign, targets, ignore_index, w)],
                [_smoothing_panel(smooth, eps, megatron, tp1, terms, min(2 * PANEL_W + 10, max_w - 2 * PAD))]]
    title = label("fig.vx_title", p=fmt.integer(tp), eps=fmt.num(eps))
    return figure_at("vocab-extras", title, rows)
