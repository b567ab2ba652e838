"""Figure of the ring and tree AllReduce (page 1, section ``ring``), one step at a time.

Ring: the ranks sit on a circle, each with its buffer cut into n chunks; tree: the ranks sit
in the binary tree of :mod:`tpmath.schedules`, each with its whole buffer as one chunk.  A
chunk's fill says how many ranks' contributions it holds (a number inside says it too; the
chunk's tooltip names them), a complete chunk is drawn as final.  The messages of the selected
step are drawn as arrows with the chunk they carry; a strip below shows all steps, the bytes
each one sends (bar height) and the two phases, with the selected step lit.

The contributions come from the core's own simulators (``schedules.simulate_*_all_reduce``)
run on buffers that hold 2^r on rank r: every reduction step adds disjoint sets of ranks, so a
chunk's value is the bit mask of the ranks it contains.
"""

from __future__ import annotations

import math

import numpy as np

from .. import schedules
from ..schedules import RingSchedule, Step, TreeSchedule
from .. import fmt
from .draw import (PAD, TreeError, arrow, arrow_head, circle, group, label, line, mid_text, n, path,
                   rank_attrs, rank_name, rect, single, text)

W = 380.0                # the drawing (a fixed geometry: a phone column wide)
SEG_W, SEG_H = 18.0, 16.0
PER_ROW = 4              # chunks per row of a rank's buffer
BADGE_H = 18.0
RING_R, ARC_R = 108.0, 160.0
CENTRE_Y = 186.0
TREE_LEVEL = 76.0


def contributions(n_ranks: int, algorithm: str, step: int) -> list[list[frozenset]]:
    """``state[r][k]``: the ranks whose data chunk k of rank r holds after ``step`` (0 = before)."""
    ring = algorithm == "ring"
    width = n_ranks if ring else 1
    if step == 0:
        return [[frozenset({r})] * width for r in range(n_ranks)]
    masks = [np.full(width, float(1 << r)) for r in range(n_ranks)]          # n × (chunks,)
    sim = (schedules.simulate_ring_all_reduce if ring else schedules.simulate_tree_all_reduce)(masks)
    return [[_ranks_of(v, n_ranks) for v in buf.tolist()] for buf in sim.steps[step - 1]]


def _ranks_of(value: float, n_ranks: int) -> frozenset:
    mask = int(value)
    if mask != value or not 0 < mask < (1 << n_ranks):
        raise TreeError(f"chunk value {value} is not a set of ranks: two steps added the same rank twice")
    return _MASKS[mask] if n_ranks <= 8 else frozenset(r for r in range(n_ranks) if mask >> r & 1)


_MASKS = [frozenset(r for r in range(8) if m >> r & 1) for m in range(256)]     # bit mask -> its ranks


def _level(k: int, n_ranks: int) -> str:
    """Fill class of a chunk holding k of n contributions (final: all n)."""
    if k >= n_ranks:
        return "chunk fin"
    return f"chunk k{min(4, 1 + (4 * (k - 1)) // max(n_ranks - 1, 1))}"


def _node(r: int, cx: float, cy: float, chunks: list[frozenset], empty: list[bool], n_ranks: int,
          fresh: set[int]) -> tuple[dict, float, float]:
    """Rank r's badge above its chunks, centred at (cx, cy); returns (node, half width, half height)."""
    per_row = min(len(chunks), PER_ROW)
    rows = -(-len(chunks) // per_row)
    w, h = per_row * SEG_W, BADGE_H + 2 + rows * SEG_H
    x0, y0 = cx - w / 2, cy - h / 2
    nodes = [rect(cx - 15, y0, 30, BADGE_H, rank_attrs(r, "badge"), rx="4"),
             mid_text(cx, y0 + BADGE_H / 2, rank_name(r), "badge-t")]
    marks = []
    for k, held in enumerate(chunks):
        x = x0 + (k % per_row) * SEG_W
        y = y0 + BADGE_H + 2 + (k // per_row) * SEG_H
        if empty[k]:
            nodes.append(rect(x, y, SEG_W, SEG_H, {"class": "nothing"}))
            continue
        cls = _level(len(held), n_ranks)
        tip = "#" + fmt.integer(k) + ": " + " + ".join(rank_name(q) for q in sorted(held))
        if k in fresh:                       # just received: a ring around the chunk (drawn last, on top)
            marks.append(rect(x - 1.5, y - 1.5, SEG_W + 3, SEG_H + 3, {"class": "newmark"}, rx="2"))
        nodes.append(rect(x, y, SEG_W, SEG_H, rank_attrs(r, cls), tip=tip, **{"data-part": f"chunk.{r}.{k}"}))
        nodes.append(mid_text(x + SEG_W / 2, y + SEG_H / 2, fmt.integer(len(held)),
                              "chunk-t fin" if len(held) >= n_ranks else "chunk-t"))
    return group(nodes + marks, part=f"rank{r}"), w / 2, h / 2


def _ring_positions(n_ranks: int) -> list[tuple[float, float, float]]:
    """(x, y, angle) of every rank: R0 at the top, clockwise (the ring order 0 → 1 → … → n−1 → 0)."""
    out = []
    for r in range(n_ranks):
        a = -math.pi / 2 + 2 * math.pi * r / n_ranks
        out.append((W / 2 + RING_R * math.cos(a), CENTRE_Y + RING_R * math.sin(a), a))
    return out


def _arc(a1: float, a2: float, cls: str, label: str | None, part: str) -> dict:
    """A clockwise arc on the outer ring from angle a1 to a2, arrowhead at a2, label outside."""
    cx, cy = W / 2, CENTRE_Y
    x1, y1 = cx + ARC_R * math.cos(a1), cy + ARC_R * math.sin(a1)
    x2, y2 = cx + ARC_R * math.cos(a2), cy + ARC_R * math.sin(a2)
    large = 1 if (a2 - a1) % (2 * math.pi) > math.pi else 0
    nodes = [path(f"M{n(x1)},{n(y1)} A{n(ARC_R)},{n(ARC_R)} 0 {large} 1 {n(x2)},{n(y2)}", cls),
             arrow_head(x2, y2, math.degrees(a2) + 90, 8, "arrowhead go")]
    if label is not None:
        am = a1 + ((a2 - a1) % (2 * math.pi)) / 2
        nodes.append(mid_text(cx + (ARC_R + 13) * math.cos(am), cy + (ARC_R + 13) * math.sin(am), label, "send-t"))
    return group(nodes, part=part)


def _ring_drawing(n_ranks: int, state: list, step: Step | None, sizes: list[int]) -> list[dict]:
    pos = _ring_positions(n_ranks)
    nodes = [circle(W / 2, CENTRE_Y, ARC_R, "strip")]
    gap = math.radians(9 if n_ranks > 2 else 14)
    fresh: dict[int, set] = {r: set() for r in range(n_ranks)}
    if step is not None:
        for t in step.transfers:
            if t.elements == 0:
                continue                    # an empty chunk (count < n) is not sent
            fresh[t.dst].add(t.chunk)
            a1, a2 = pos[t.src][2], pos[t.dst][2]
            if a2 <= a1:
                a2 += 2 * math.pi
            nodes.append(_arc(a1 + gap, a2 - gap, "arrow go", "#" + fmt.integer(t.chunk),
                              f"send.{t.src}.{t.dst}.{t.chunk}"))
    empty = [s == 0 for s in sizes]
    for r, (x, y, _) in enumerate(pos):
        nodes.append(_node(r, x, y, state[r], empty, n_ranks, fresh[r])[0])
    return nodes


def _tree_positions(n_ranks: int) -> list[tuple[float, float]]:
    """Heap order: rank r at depth ⌊log2(r+1)⌋, spread over its level as in a full binary tree."""
    out = []
    for r in range(n_ranks):
        d = schedules.tree_depth(r)
        slot = r - (2 ** d - 1)
        out.append((PAD + (W - 2 * PAD) * (slot + 0.5) / 2 ** d, 40 + TREE_LEVEL * d))
    return out


def _tree_drawing(n_ranks: int, state: list, step: Step | None) -> list[dict]:
    pos = _tree_positions(n_ranks)
    nodes = []
    for r in range(1, n_ranks):
        (x1, y1), (x2, y2) = pos[schedules.tree_parent(r)], pos[r]
        nodes.append(line(x1, y1, x2, y2, "strip"))
    fresh: dict[int, set] = {r: set() for r in range(n_ranks)}
    sends = []
    if step is not None:
        for t in step.transfers:
            fresh[t.dst].add(0)
            (x1, y1), (x2, y2) = pos[t.src], pos[t.dst]
            sends.append(group(arrow(x1, y1, x2, y2, "arrow go", "arrowhead go", gap=24),
                               part=f"send.{t.src}.{t.dst}.0"))
    for r, (x, y) in enumerate(pos):
        nodes.append(_node(r, x, y, state[r], [False], n_ranks, fresh[r])[0])
    return nodes + sends


def _strip(steps: list[Step], current: int, step_bytes: list[str], top: float) -> tuple[list[dict], float]:
    """Steps 0…T as numbered circles, the bytes each step sends as bars, the phases below."""
    total = len(steps)
    gap = min(48.0, (W - 2 * PAD - 24) / (total + 1))
    x0 = PAD + 12 + max(0.0, (W - 2 * PAD - 24 - gap * total) / 2)
    sent = [sum(t.bytes for t in s.transfers if t.elements > 0) for s in steps]
    most = max(sent) or 1
    bar_h = 26.0
    y = top + bar_h + 14
    nodes = [line(x0, y, x0 + gap * total, y, "strip")]
    for i in range(total + 1):
        cx = x0 + gap * i
        lit = " hl" if i == current else ""
        if i:
            h = max(2.0, bar_h * sent[i - 1] / most)
            nodes.append(rect(cx - 5, top + bar_h - h, 10, h, {"class": "sbar" + lit}, **{"data-part": f"bytes.{i}"}))
        nodes.append(circle(cx, y, 9, "step" + lit))
        nodes.append(mid_text(cx, y, fmt.integer(i), "step-t"))
    # the phases: a bracket under their steps, the name below (second phase one line lower)
    phases: list[tuple[str, int, int]] = []
    for i, s in enumerate(steps, start=1):
        if phases and phases[-1][0] == s.phase:
            phases[-1] = (s.phase, phases[-1][1], i)
        else:
            phases.append((s.phase, i, i))
    for row, (phase, a, b) in enumerate(phases):
        xa, xb = x0 + gap * a - 9, x0 + gap * b + 9
        yb = y + 15
        nodes.append(path(f"M{n(xa)},{n(yb - 3)} V{n(yb)} H{n(xb)} V{n(yb - 3)}", "strip"))
        nodes.append(text(xa, yb + 13 + 14 * row, label("fig.ri_" + phase.replace("-", "_")), "dimtext"))
    height = y + 15 + 13 + 14 * (len(phases) - 1) + 6 - top
    return [group(nodes, part="steps")], height


def _centre(algorithm: str, current: int, steps: list[Step], step_bytes: list[str], y: float) -> list[dict]:
    """What the selected step does, in words: its number, its phase, the bytes it sends."""
    total = len(steps)
    lines = [mid_text(W / 2, y - 20, label("fig.ri_step", s=fmt.integer(current), t=fmt.integer(total)), "cap")]
    if current == 0:
        lines.append(mid_text(W / 2, y, label("fig.ri_start"), "dimtext"))
    else:
        step = steps[current - 1]
        lines.append(mid_text(W / 2, y, label("fig.ri_" + step.phase.replace("-", "_")), "dimtext"))
        lines.append(mid_text(W / 2, y + 16, label("fig.ri_sent"), "dimtext"))
        lines.append(mid_text(W / 2, y + 31, step_bytes[current - 1], "num em"))
    return [group(lines, part="now")]


def _legend(n_ranks: int, algorithm: str, top: float) -> tuple[list[dict], float]:
    """What the fills and outlines of the chunks mean (the numbers say it too)."""
    count = (label("fig.ri_leg_count", last="#" + fmt.integer(n_ranks - 1)) if algorithm == "ring"
             else label("fig.ri_leg_count_tree"))
    k = max(1, n_ranks // 2)
    nodes = [rect(PAD, top, SEG_W, SEG_H, {"class": _level(k, n_ranks)}),
             mid_text(PAD + SEG_W / 2, top + SEG_H / 2, fmt.integer(k), "chunk-t"),
             mid_text(PAD + SEG_W + 6, top + SEG_H / 2, count, "dimtext", "start"),
             rect(PAD, top + 22, SEG_W, SEG_H, {"class": "chunk fin"}),
             mid_text(PAD + SEG_W / 2, top + 22 + SEG_H / 2, fmt.integer(n_ranks), "chunk-t fin"),
             mid_text(PAD + SEG_W + 6, top + 22 + SEG_H / 2, label("fig.ri_leg_final"), "dimtext", "start"),
             rect(W / 2 + 10, top + 22, SEG_W, SEG_H, {"class": "chunk k1"}),
             rect(W / 2 + 8.5, top + 20.5, SEG_W + 3, SEG_H + 3, {"class": "newmark"}, rx="2"),
             mid_text(W / 2 + 16 + SEG_W, top + 22 + SEG_H / 2, label("fig.ri_leg_new"), "dimtext", "start")]
    return [group(nodes, part="legend")], 40.0


def figure_ring(n_ranks: int, algorithm: str, sched: RingSchedule | TreeSchedule, current: int, step_bytes: list[str]) -> dict:
    """The ``ring`` figure after step ``current`` (0: before the first step) of ``sched``
    (``schedules.all_reduce_schedule``); ``step_bytes``: the table's bytes-per-step cells."""
    steps = sched.steps
    state = contributions(n_ranks, algorithm, current)
    step = steps[current - 1] if current else None
    if algorithm == "ring":
        sizes = [c.elements for c in sched.chunks]
        body = _ring_drawing(n_ranks, state, step, sizes)
        body += _centre(algorithm, current, steps, step_bytes, CENTRE_Y)
        top = CENTRE_Y + ARC_R + 26
    else:
        body = _tree_drawing(n_ranks, state, step)
        depth = schedules.tree_depth(n_ranks - 1)
        top = 40 + TREE_LEVEL * depth + 40
        body = [group(_tree_caption(current, steps, step_bytes), part="now")] + body
    strip, strip_h = _strip(steps, current, step_bytes, top)
    legend, legend_h = _legend(n_ranks, algorithm, top + strip_h + 6)
    title = label("fig.ri_title", algo=label("fig.ri_" + algorithm), n=fmt.integer(n_ranks), s=fmt.integer(current),
                t=fmt.integer(len(steps)))
    return single("ring", title, body + strip + legend, W, top + strip_h + 6 + legend_h + PAD)


def _tree_caption(current: int, steps: list[Step], step_bytes: list[str]) -> list[dict]:
    """The tree's step in words, in its top left corner (the tree fills the middle)."""
    out = [text(PAD, 14, label("fig.ri_step", s=fmt.integer(current), t=fmt.integer(len(steps))), "cap")]
    if current:
        phase = steps[current - 1].phase
        out += [text(PAD, 30, label("fig.ri_" + phase), "dimtext"),
                text(W - PAD, 14, label("fig.ri_sent"), "dimtext", "end"),
                text(W - PAD, 30, step_bytes[current - 1], "num em", "end")]
    else:
        out.append(text(PAD, 30, label("fig.ri_start"), "dimtext"))
    return out
