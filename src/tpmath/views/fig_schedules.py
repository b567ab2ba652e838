"""Figure of the ring and tree AllReduce (page 1, section ``ring``), one step at a time.

Ring: the ranks sit on a circle, each with its buffer cut into n chunks; tree: the ranks sit
in the binary tree of :mod:`tpmath.schedules`, each with its whole buffer as one chunk.  A
chunk's fill says how many ranks' contributions it holds (a number inside says it too; the
chunk's tooltip names them), a complete chunk is drawn as final.  The messages of the selected
step are drawn as arrows with the chunk they carry; a strip below shows all steps, the bytes
each one sends (bar height) and the two phases, with the selected step lit.  On a phone the
ring's ranks are stacked in ring order, one buffer a row (chunk k under the column head #k), so
a message is an arrow from a chunk down to the same chunk of the next rank, and the phases of
the strip take a line each where one would not fit.

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
from .draw import (PAD, Panel, Row, TreeError, arrow, arrow_head, badge, circle, flow, flowed, group, label, line,
                   mid_text, moved, n, note_panel, pair, path, rank_attrs, rank_name, rect)

SEG_W, SEG_H = 18.0, 16.0
PER_ROW = 4              # chunks per row of a rank's buffer on the ring
BADGE_W, BADGE_H = 30.0, 18.0
RING_R, ARC_R = 108.0, 160.0
RING_SIZE = 2 * (ARC_R + 26)     # the ring and the chunk labels outside it
TREE_W = 380.0           # the tree's drawing on a desktop (a phone: the column)
TREE_LEVEL = 76.0
NODE_TOP = 20.0          # the root's centre below the tree drawing's top
STEP_W, STEP_W_MAX = 26.0, 48.0  # one step of the strip: at least a circle and a little air
STEP_R = 9.0
BAR_H = 26.0             # the bytes of the busiest step
STEP_GAP = 14.0          # from the bars down to the steps' centres
BRACKET_GAP, BRACKET_H = 6.0, 3.0    # a phase's bracket under its steps
ARC_LABEL = 13.0         # a message's chunk label outside the ring
GUTTER = 22.0            # right of the stacked buffers: the way back from the last rank to R0
LANE_SKIP = 26.0         # from one stacked buffer to the next: the lanes' edges and the gap between


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


def _chunks(r: int, chunks: list[frozenset], empty: list[bool], n_ranks: int, fresh: set[int], per_row: int,
            x0: float, y0: float) -> list[dict]:
    """Rank r's buffer: its chunks, ``per_row`` a row, top left at (x0, y0); a chunk just received
    ringed (the ring drawn last, on top)."""
    nodes, marks = [], []
    for k, held in enumerate(chunks):
        x = x0 + (k % per_row) * SEG_W
        y = y0 + (k // per_row) * SEG_H
        if empty[k]:
            nodes.append(rect(x, y, SEG_W, SEG_H, {"class": "nothing"}))
            continue
        cls = _level(len(held), n_ranks)
        tip = "#" + fmt.integer(k) + ": " + " + ".join(rank_name(q) for q in sorted(held))
        if k in fresh:
            marks.append(rect(x - 1.5, y - 1.5, SEG_W + 3, SEG_H + 3, {"class": "newmark"}, rx="2"))
        nodes.append(rect(x, y, SEG_W, SEG_H, rank_attrs(r, cls), tip=tip, **{"data-part": f"chunk.{r}.{k}"}))
        nodes.append(mid_text(x + SEG_W / 2, y + SEG_H / 2, fmt.integer(len(held)),
                              "chunk-t fin" if len(held) >= n_ranks else "chunk-t"))
    return nodes + marks


def _node(r: int, cx: float, cy: float, chunks: list[frozenset], empty: list[bool], n_ranks: int,
          fresh: set[int]) -> dict:
    """Rank r's badge above its chunks, centred at (cx, cy) (a node of the ring or the tree)."""
    per_row = min(len(chunks), PER_ROW)
    rows = -(-len(chunks) // per_row)
    w, h = per_row * SEG_W, BADGE_H + 2 + rows * SEG_H
    x0, y0 = cx - w / 2, cy - h / 2
    nodes = badge(r, cx - BADGE_W / 2, y0, BADGE_W, BADGE_H)
    nodes += _chunks(r, chunks, empty, n_ranks, fresh, per_row, x0, y0 + BADGE_H + 2)
    return group(nodes, part=f"rank{r}")


def _fresh(n_ranks: int, step: Step | None) -> dict[int, set]:
    """The chunks each rank receives in ``step`` (an empty chunk, count < n, is not sent)."""
    fresh: dict[int, set] = {r: set() for r in range(n_ranks)}
    for t in step.transfers if step is not None else ():
        if t.elements:
            fresh[t.dst].add(t.chunk)
    return fresh


# ---------------------------------------------------------------- the ring on a desktop

def _arc(centre: float, a1: float, a2: float, cls: str, label: str | None, part: str) -> dict:
    """A clockwise arc on the outer ring from angle a1 to a2, arrowhead at a2, label outside."""
    x1, y1 = centre + ARC_R * math.cos(a1), centre + ARC_R * math.sin(a1)
    x2, y2 = centre + ARC_R * math.cos(a2), centre + ARC_R * math.sin(a2)
    large = 1 if (a2 - a1) % (2 * math.pi) > math.pi else 0
    nodes = [path(f"M{n(x1)},{n(y1)} A{n(ARC_R)},{n(ARC_R)} 0 {large} 1 {n(x2)},{n(y2)}", cls),
             arrow_head(x2, y2, math.degrees(a2) + 90, 8, "arrowhead go")]
    if label is not None:
        am = a1 + ((a2 - a1) % (2 * math.pi)) / 2
        nodes.append(mid_text(centre + (ARC_R + ARC_LABEL) * math.cos(am), centre + (ARC_R + ARC_LABEL) * math.sin(am), label,
                              "send-t"))
    return group(nodes, part=part)


def _ring_panel(n_ranks: int, state: list, step: Step | None, sizes: list[int], centre_text: list) -> Panel:
    """The ranks on a circle, R0 at the top, clockwise (the ring order 0 → 1 → … → n−1 → 0); the
    step's messages as arcs outside it; what the step does in words inside it."""
    c = RING_SIZE / 2
    angles = [-math.pi / 2 + 2 * math.pi * r / n_ranks for r in range(n_ranks)]
    nodes = [circle(c, c, ARC_R, "strip")]
    gap = math.radians(9 if n_ranks > 2 else 14)
    for t in step.transfers if step is not None else ():
        if t.elements == 0:
            continue
        a1, a2 = angles[t.src], angles[t.dst]
        if a2 <= a1:
            a2 += 2 * math.pi
        nodes.append(_arc(c, a1 + gap, a2 - gap, "arrow go", "#" + fmt.integer(t.chunk), f"send.{t.src}.{t.dst}.{t.chunk}"))
    empty, fresh = [s == 0 for s in sizes], _fresh(n_ranks, step)
    for r, a in enumerate(angles):
        nodes.append(_node(r, c + RING_R * math.cos(a), c + RING_R * math.sin(a), state[r], empty, n_ranks, fresh[r]))
    lines = len(centre_text)
    nodes.append(group([mid_text(c, c + (i - (lines - 1) / 2) * 16, cell, cls) for i, (cell, cls) in
                        enumerate(centre_text)], part="now"))
    return Panel(RING_SIZE, RING_SIZE, nodes)


# ---------------------------------------------------------------- the ring on a phone: stacked buffers

def _lanes(n_ranks: int, state: list, sizes: list[int], step: Step | None) -> list:
    """One lane per rank, in ring order top to bottom: its badge and its buffer in one row (chunk k
    under the column head #k)."""
    empty, fresh = [s == 0 for s in sizes], _fresh(n_ranks, step)
    heads = Panel(n_ranks * SEG_W, 12, [mid_text((k + 0.5) * SEG_W, 6, "#" + fmt.integer(k), "send-t")
                                        for k in range(n_ranks)], part="heads")
    rows = [Row([Panel(BADGE_W + 6, 1), heads])]
    for r in range(n_ranks):
        buf = Panel(n_ranks * SEG_W + GUTTER, SEG_H, _chunks(r, state[r], empty, n_ranks, fresh[r], n_ranks, 0, 0),
                    part=f"rank{r}")
        rows.append(Row([Panel(BADGE_W + 6, SEG_H, badge(r, 0, (SEG_H - BADGE_H) / 2, BADGE_W, BADGE_H)), buf],
                        rank=r))
    return rows


def _lane_sends(n_ranks: int, step: Step | None, where: dict) -> list[dict]:
    """The ring order (grey: each rank to the next, the last back to R0 right of the buffers) and
    the step's messages over it: chunk k straight down to the next rank's chunk k, or, from the last
    rank, along the way back into R0's."""
    top = {r: where[f"rank{r}"] for r in range(n_ranks)}
    x_badge = top[0][0] - 10 - BADGE_W / 2 - 6
    back = top[0][0] + n_ranks * SEG_W + GUTTER / 2
    last_y = top[n_ranks - 1][1] + SEG_H
    nodes = []
    for r in range(n_ranks - 1):
        nodes += arrow(x_badge, top[r][1] + SEG_H + 2, x_badge, top[r + 1][1] - 2, "strip", "arrowhead")
    turn_down, turn_up = last_y + 8, top[0][1] - 8
    nodes.append(path(f"M{n(back - GUTTER / 2)},{n(last_y + 4)} H{n(back)} V{n(turn_up)} "
                      f"H{n(back - GUTTER / 2)}", "strip"))
    for t in step.transfers if step is not None else ():
        if t.elements == 0:
            continue
        x = top[t.src][0] + (t.chunk + 0.5) * SEG_W
        y1 = top[t.src][1] + SEG_H
        label = "#" + fmt.integer(t.chunk)
        if t.dst == t.src + 1:
            y2 = top[t.dst][1]
            parts = arrow(x, y1 + 1, x, y2 - 1, "arrow go", "arrowhead go")
            parts.append(mid_text(x + 4, (y1 + y2) / 2, label, "send-t", "start"))
        else:                   # the last rank to R0: down, right, up the way back, left, down
            parts = [path(f"M{n(x)},{n(y1 + 1)} V{n(turn_down)} H{n(back)} V{n(turn_up)} H{n(x)} "
                          f"V{n(top[0][1] - 7)}", "arrow go"),
                     arrow_head(x, top[0][1] - 1, 90, 7, "arrowhead go"),
                     mid_text(back + 3, (turn_up + turn_down) / 2, label, "send-t", "start")]
        nodes.append(group(parts, part=f"send.{t.src}.{t.dst}.{t.chunk}"))
    return nodes


# ---------------------------------------------------------------- the tree

def _tree_panel(n_ranks: int, state: list, step: Step | None, w: float) -> Panel:
    """Heap order: rank r at depth ⌊log2(r+1)⌋, spread over its level as in a full binary tree."""
    pos = []
    for r in range(n_ranks):
        d = schedules.tree_depth(r)
        pos.append((w * (r - (2 ** d - 1) + 0.5) / 2 ** d, NODE_TOP + TREE_LEVEL * d))
    nodes = [line(*pos[schedules.tree_parent(r)], *pos[r], "strip") for r in range(1, n_ranks)]
    fresh = _fresh(n_ranks, step)
    sends = [group(arrow(*pos[t.src], *pos[t.dst], "arrow go", "arrowhead go", gap=24), part=f"send.{t.src}.{t.dst}.0")
             for t in (step.transfers if step is not None else ())]
    nodes += [_node(r, x, y, state[r], [False], n_ranks, fresh[r]) for r, (x, y) in enumerate(pos)]
    return Panel(w, 2 * NODE_TOP + TREE_LEVEL * schedules.tree_depth(n_ranks - 1), nodes + sends)


# ---------------------------------------------------------------- steps, words, legend

def _phases(steps: list[Step]) -> list[tuple[str, int, int]]:
    """(phase, first step, last step) of each phase, in order."""
    out: list[tuple[str, int, int]] = []
    for i, s in enumerate(steps, start=1):
        if out and out[-1][0] == s.phase:
            out[-1] = (s.phase, out[-1][1], i)
        else:
            out.append((s.phase, i, i))
    return out


def _steps_panel(first: int, last: int, total: int, current: int, sent: list[int], step_w: float,
                 phase: str | None) -> Panel:
    """Steps first…last as numbered circles on a line, the bytes each sends as bars above them,
    the active one lit; a phase's bracket and name under them."""
    most = max(sent) or 1
    cy = BAR_H + STEP_GAP
    centres = [(i - first + 0.5) * step_w for i in range(first, last + 1)]
    # the line through the steps runs on into the next panel (the steps are one line where they fit)
    nodes = [line(centres[0] if first == 0 else 0.0, cy, centres[-1] if last == total else len(centres) * step_w,
                  cy, "strip")]
    for i, cx in zip(range(first, last + 1), centres):
        lit = " hl" if i == current else ""
        if i:
            h = max(2.0, BAR_H * sent[i - 1] / most)
            nodes.append(rect(cx - 5, BAR_H - h, 10, h, {"class": "sbar" + lit}, **{"data-part": f"bytes.{i}"}))
        nodes.append(circle(cx, cy, STEP_R, "step" + lit))
        nodes.append(mid_text(cx, cy, fmt.integer(i), "step-t"))
    h = cy + STEP_R
    if phase is not None:
        xa, xb, yb = centres[0] - STEP_R, centres[-1] + STEP_R, cy + STEP_R + BRACKET_GAP
        name = label("fig.ri_" + phase.replace("-", "_"))
        words = note_panel(name, TREE_W)
        nodes += [path(f"M{n(xa)},{n(yb - BRACKET_H)} V{n(yb)} H{n(xb)} V{n(yb - BRACKET_H)}", "strip"),
                  moved(words.nodes, xa, yb)]
        return Panel(max(len(centres) * step_w, xa + words.w), yb + words.h, nodes)
    return Panel(len(centres) * step_w, h, nodes, joins=True)          # step 0 stays with the first phase


def _strip(steps: list[Step], current: int, w: float) -> Panel:
    """Steps 0…T: a panel for the start and one for each phase, on one line where they fit."""
    total = len(steps)
    step_w = max(STEP_W, min(STEP_W_MAX, (w - 24) / (total + 1)))
    sent = [sum(t.bytes for t in s.transfers if t.elements > 0) for s in steps]
    panels = [_steps_panel(0, 0, total, current, sent, step_w, None)]
    panels += [_steps_panel(a, b, total, current, sent, step_w, phase) for phase, a, b in _phases(steps)]
    strip = flowed([panels], w, part="steps", gap=0)
    return strip


def _now(algorithm: str, current: int, steps: list[Step], step_bytes: list[str]) -> list[tuple]:
    """What the selected step does, in words: (cell, class) lines — its number, its phase, the bytes."""
    lines = [(label("fig.ri_step", s=fmt.integer(current), t=fmt.integer(len(steps))), "cap")]
    if current == 0:
        return lines + [(label("fig.ri_start"), "dimtext")]
    phase = steps[current - 1].phase.replace("-", "_")
    return lines + [(label("fig.ri_" + phase), "dimtext"), (label("fig.ri_sent"), "dimtext"),
                    (step_bytes[current - 1], "num em")]


def _now_panel(lines: list[tuple], w: float) -> Panel:
    """The words of :func:`_now` above the drawing: the step and its phase on one line, what it
    sends on the next."""
    def word(cell, cls):
        return note_panel(cell, w, cls)
    rows = [[word(*lines[0]), word(*lines[1])]] + ([[word(*lines[2]), word(*lines[3])]] if len(lines) > 2 else [])
    return flowed(rows, w, part="now", row_gap=2)


def _key(swatch: list[dict], pieces: list, w: float) -> Panel:
    """A legend key: its swatch (a chunk) and what it means, wrapped to ``w``."""
    words = note_panel(pieces, w - SEG_W - 6)
    return Panel(SEG_W + 6 + words.w, max(SEG_H, words.h), swatch + [moved(words.nodes, SEG_W + 6, 1)])


def _legend(n_ranks: int, algorithm: str, w: float) -> Panel:
    """What the fills and outlines of the chunks mean (the numbers say it too)."""
    count = ([label("fig.ri_leg_count_1"), label("fig.ri_leg_count_2", last="#" + fmt.integer(n_ranks - 1))]
             if algorithm == "ring" else [label("fig.ri_leg_count_tree")])
    k = max(1, n_ranks // 2)

    def chunk(cls: str, number: str | None, new: bool = False) -> list[dict]:
        out = [rect(0, 0, SEG_W, SEG_H, {"class": cls})]
        if number is not None:
            out.append(mid_text(SEG_W / 2, SEG_H / 2, number, "chunk-t fin" if cls == "chunk fin" else "chunk-t"))
        if new:
            out.append(rect(-1.5, -1.5, SEG_W + 3, SEG_H + 3, {"class": "newmark"}, rx="2"))
        return out
    return flowed([[_key(chunk(_level(k, n_ranks), fmt.integer(k)), count, w)],
                   [_key(chunk("chunk fin", fmt.integer(n_ranks)), [label("fig.ri_leg_final")], w),
                    _key(chunk("chunk k1", None, new=True), [label("fig.ri_leg_new")], w)]], w, part="legend", gap=24)


# ---------------------------------------------------------------- the figure

def _ring_layout(n_ranks: int, algorithm: str, sched, current: int, step_bytes: list[str],
                 max_w: float) -> tuple[list[dict], float, float]:
    steps = sched.steps
    state = contributions(n_ranks, algorithm, current)
    step = steps[current - 1] if current else None
    w = max_w - 2 * PAD
    words = _now(algorithm, current, steps, step_bytes)
    where: dict = {}
    strip = _strip(steps, current, min(w, TREE_W))
    # under the ring or the tree, centred on it (a phone: the column's width)
    indent = Panel(max(0.0, (min(w, RING_SIZE if algorithm == "ring" else TREE_W) - strip.w) / 2 - 10), 1)
    tail = [[indent, strip] if indent.w > 0 else [strip], [_legend(n_ranks, algorithm, w)]]
    if algorithm == "tree":
        rows = [[_now_panel(words, w)], [_tree_panel(n_ranks, state, step, min(w, TREE_W))]] + tail
    elif w >= RING_SIZE:
        rows = [[_ring_panel(n_ranks, state, step, [c.elements for c in sched.chunks], words)]] + tail
    else:
        rows = [[_now_panel(words, w)]] + _lanes(n_ranks, state, [c.elements for c in sched.chunks], step) + tail
    nodes, width, height = flow(rows, max_w, where=where)
    if "rank0" in where and algorithm == "ring" and w < RING_SIZE:
        nodes += _lane_sends(n_ranks, step, where)
    return nodes, width, height


def figure_ring(n_ranks: int, algorithm: str, sched: RingSchedule | TreeSchedule, current: int, step_bytes: list[str]) -> dict:
    """The ``ring`` figure after step ``current`` (0: before the first step) of ``sched``
    (``schedules.all_reduce_schedule``); ``step_bytes``: the table's bytes-per-step cells.  On a
    desktop the ring is a circle; on a phone its ranks are stacked in ring order, each buffer in
    one row, so that a message is an arrow from a chunk to the same chunk of the next rank."""
    title = label("fig.ri_title", algo=label("fig.ri_" + algorithm), n=fmt.integer(n_ranks), s=fmt.integer(current),
                  t=fmt.integer(len(sched.steps)))
    return pair("ring", title, lambda max_w: _ring_layout(n_ranks, algorithm, sched, current, step_bytes, max_w))
