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

import functools

import numpy as np

from .. import schedules
from ..schedules import RingSchedule, Step, TreeSchedule
from .. import fmt
from .draw import (FLOW_GAP, PAD, Cell, Link, Panel, Row, TreeError, badge_panel, cell_block, column, figure_at, flowed,
                   heap_tree, key, label, note_panel, orbit, rank_name, step_strip)

SEG_W, SEG_H = 18.0, 16.0
PER_ROW = 4              # chunks per row of a rank's buffer on the ring
BADGE_W, BADGE_H = 30.0, 18.0
RING_R = 108.0           # the ranks' centres; the messages run on draw.orbit's track outside them
RING_SIZE = 372.0        # the ring: draw.orbit's track (radius 160) and the chunk labels 26 px outside it
TREE_W = 380.0           # the tree's drawing on a desktop (a phone: the column)
TREE_LEVEL = 76.0
NODE_TOP = 20.0          # the root's centre below the tree drawing's top
STEP_W, STEP_W_MAX = 26.0, 48.0  # one step of the strip: at least a circle and a little air
LANE_BADGE_W = BADGE_W + 6   # a stacked lane's badge and the air right of it
GUTTER = 22.0            # right of the stacked buffers: the way back from the last rank to R0


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
    return _ranks_in(mask)


@functools.lru_cache(maxsize=None)
def _ranks_in(mask: int) -> frozenset:
    """The ranks of a bit mask (remembered: a figure reads the same few masks in every chunk)."""
    return frozenset(r for r in range(mask.bit_length()) if mask >> r & 1)


def _level(k: int, n_ranks: int) -> str:
    """Fill class of a chunk holding k of n contributions (final: all n)."""
    if k >= n_ranks:
        return "chunk fin"
    return f"chunk k{min(4, 1 + (4 * (k - 1)) // max(n_ranks - 1, 1))}"


def _buffer(r: int, chunks: list[frozenset], empty: list[bool], n_ranks: int, fresh: set[int], per_row: int,
            part: str | None = None) -> Panel:
    """Rank r's buffer: its chunks, ``per_row`` a row, each filled by how many ranks it holds (the
    number on it says it too, its tooltip names them); a chunk just received ringed."""
    cells = []
    for k, held in enumerate(chunks):
        if empty[k]:
            cells.append(Cell("nothing"))
            continue
        tip = "#" + fmt.integer(k) + ": " + " + ".join(rank_name(q) for q in sorted(held))
        cells.append(Cell(_level(len(held), n_ranks), fmt.integer(len(held)), r,
                          "chunk-t fin" if len(held) >= n_ranks else "chunk-t", tip=tip, name=f"chunk.{r}.{k}",
                          mark="newmark" if k in fresh else None))
    return cell_block(cells, per_row, SEG_W, SEG_H, part=part)


def _node(r: int, chunks: list[frozenset], empty: list[bool], n_ranks: int, fresh: set[int]) -> Panel:
    """Rank r's badge above its chunks (a node of the ring or the tree)."""
    per_row = min(len(chunks), PER_ROW)
    return column([badge_panel(r, BADGE_H, 0, BADGE_H, BADGE_W, w=BADGE_W, part=None),
                   _buffer(r, chunks, empty, n_ranks, fresh, per_row)], gap=2, part=f"rank{r}", centred=True)


def _fresh(n_ranks: int, step: Step | None) -> dict[int, set]:
    """The chunks each rank receives in ``step`` (an empty chunk, count < n, is not sent)."""
    fresh: dict[int, set] = {r: set() for r in range(n_ranks)}
    for t in step.transfers if step is not None else ():
        if t.elements:
            fresh[t.dst].add(t.chunk)
    return fresh


# ---------------------------------------------------------------- the ring on a desktop

def _ring_panel(n_ranks: int, state: list, step: Step | None, sizes: list[int], centre_text: list) -> Panel:
    """The ranks on a circle, R0 at the top, clockwise (the ring order 0 → 1 → … → n−1 → 0); the
    step's messages as arcs outside it; what the step does in words inside it."""
    empty, fresh = [s == 0 for s in sizes], _fresh(n_ranks, step)
    sends = [(t.src, t.dst, "#" + fmt.integer(t.chunk), f"send.{t.src}.{t.dst}.{t.chunk}")
             for t in (step.transfers if step is not None else ()) if t.elements]
    return orbit([_node(r, state[r], empty, n_ranks, fresh[r]) for r in range(n_ranks)], RING_R, RING_SIZE, sends,
                 centre_text)


# ---------------------------------------------------------------- the ring on a phone: stacked buffers

def _lanes(n_ranks: int, state: list, sizes: list[int], step: Step | None) -> list:
    """One lane per rank, in ring order top to bottom: its badge and its buffer in one row (chunk k
    under the column head #k), room right of it for the way back to R0."""
    empty, fresh = [s == 0 for s in sizes], _fresh(n_ranks, step)
    heads = cell_block([Cell(None, "#" + fmt.integer(k), text_cls="send-t") for k in range(n_ranks)], n_ranks, SEG_W,
                       12, part="heads")
    rows = [Row([Panel(LANE_BADGE_W, 1), heads])]
    for r in range(n_ranks):
        rows.append(Row([badge_panel(r, SEG_H, (SEG_H - BADGE_H) / 2, BADGE_H, BADGE_W, w=LANE_BADGE_W, part=f"badge{r}"),
                         _buffer(r, state[r], empty, n_ranks, fresh[r], n_ranks, part=f"rank{r}"),
                         Panel(GUTTER - FLOW_GAP, SEG_H)], rank=r))
    return rows


def _lane_sends(n_ranks: int, step: Step | None) -> list[Link]:
    """The ring order (grey: each rank to the next, the last back to R0 right of the buffers) and
    the step's messages over it: chunk k straight down to the next rank's chunk k, or, from the last
    rank, along the way back into R0's."""
    links = [Link("arrow", (f"badge{r}.bottom", f"badge{r + 1}.top"), "strip", gap=1) for r in range(n_ranks - 1)]
    links.append(Link("around", (f"rank{n_ranks - 1}.br", "rank0.tr"), "strip", None, track=GUTTER / 2))
    for t in step.transfers if step is not None else ():
        if t.elements == 0:
            continue
        ends = (f"chunk.{t.src}.{t.chunk}.bottom", f"chunk.{t.dst}.{t.chunk}.top")
        kind = "arrow" if t.dst == t.src + 1 else "around"           # the last rank to R0: the way back
        links.append(Link(kind, ends, "arrow go", "arrowhead go", part=f"send.{t.src}.{t.dst}.{t.chunk}",
                          label="#" + fmt.integer(t.chunk), gap=1, track=GUTTER / 2, via=("rank0.tr",)))
    return links


# ---------------------------------------------------------------- the tree

def _tree_panel(n_ranks: int, state: list, step: Step | None, w: float) -> Panel:
    """Heap order (as :mod:`tpmath.schedules` numbers the tree): rank r's parent is (r − 1) // 2."""
    fresh = _fresh(n_ranks, step)
    return heap_tree([_node(r, state[r], [False], n_ranks, fresh[r]) for r in range(n_ranks)], w, TREE_LEVEL, NODE_TOP)


def _tree_sends(step: Step | None) -> list[Link]:
    return [Link("arrow", (f"node{t.src}", f"node{t.dst}"), "arrow go", "arrowhead go", part=f"send.{t.src}.{t.dst}.0",
                 gap=24) for t in (step.transfers if step is not None else ())]


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


def _strip(steps: list[Step], current: int, w: float) -> Panel:
    """Steps 0…T: a strip for the start and one for each phase (its bracket and name under it),
    the bytes each step sends as bars, on one line where they fit."""
    total = len(steps)
    step_w = max(STEP_W, min(STEP_W_MAX, (w - 24) / (total + 1)))
    sent = [sum(t.bytes for t in s.transfers if t.elements > 0) for s in steps]
    most = max(sent) or 1

    def strip(first: int, last: int, phase: str | None) -> Panel:
        nums = list(range(first, last + 1))
        return step_strip(nums, current, step_w, [sent[i - 1] / most if i else None for i in nums],
                          (first == 0, last == total),
                          None if phase is None else label("fig.ri_" + phase.replace("-", "_")), TREE_W)
    panels = [strip(0, 0, None)] + [strip(a, b, phase) for phase, a, b in _phases(steps)]
    return flowed([panels], w, part="steps", gap=0)


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
    rows = [[word(*a), word(*b)] for a, b in zip(lines[::2], lines[1::2])]
    return flowed(rows, w, part="now", row_gap=2)


def _legend(n_ranks: int, algorithm: str, w: float) -> Panel:
    """What the fills and outlines of the chunks mean (the numbers say it too)."""
    count = ([label("fig.ri_leg_count_1"), label("fig.ri_leg_count_2", last="#" + fmt.integer(n_ranks - 1))]
             if algorithm == "ring" else [label("fig.ri_leg_count_tree")])
    k = max(1, n_ranks // 2)

    def chunk(cls: str, number: str | None, new: bool = False) -> Panel:
        return cell_block([Cell(cls, number, text_cls="chunk-t fin" if cls == "chunk fin" else "chunk-t",
                                mark="newmark" if new else None)], 1, SEG_W, SEG_H)
    return flowed([[key("", count, w, swatch=chunk(_level(k, n_ranks), fmt.integer(k)))],
                   [key("", [label("fig.ri_leg_final")], w, swatch=chunk("chunk fin", fmt.integer(n_ranks))),
                    key("", [label("fig.ri_leg_new")], w, swatch=chunk("chunk k1", None, new=True))]], w,
                  part="legend", gap=24)


# ---------------------------------------------------------------- the figure

def figure_ring(n_ranks: int, algorithm: str, sched: RingSchedule | TreeSchedule, current: int, step_bytes: list[str]) -> dict:
    """The ``ring`` figure after step ``current`` (0: before the first step) of ``sched``
    (``schedules.all_reduce_schedule``); ``step_bytes``: the table's bytes-per-step cells.  On a
    desktop the ring is a circle; on a phone its ranks are stacked in ring order, each buffer in
    one row, so that a message is an arrow from a chunk to the same chunk of the next rank."""
    steps = sched.steps
    state = contributions(n_ranks, algorithm, current)
    step = steps[current - 1] if current else None
    sizes = [c.elements for c in sched.chunks]
    words = _now(algorithm, current, steps, step_bytes)

    def stacked(max_w: float) -> bool:            # the ring's ranks in lanes: the circle does not fit
        return algorithm == "ring" and max_w - 2 * PAD < RING_SIZE

    def rows_at(max_w: float) -> list:
        w = max_w - 2 * PAD
        strip = _strip(steps, current, min(w, TREE_W))
        # under the ring or the tree, centred on it (a phone: the column's width)
        indent = Panel(max(0.0, (min(w, RING_SIZE if algorithm == "ring" else TREE_W) - strip.w) / 2 - FLOW_GAP), 1)
        tail = [[indent, strip] if indent.w > 0 else [strip], [_legend(n_ranks, algorithm, w)]]
        if algorithm == "tree":
            return [[_now_panel(words, w)], [_tree_panel(n_ranks, state, step, min(w, TREE_W))]] + tail
        if not stacked(max_w):
            return [[_ring_panel(n_ranks, state, step, sizes, words)]] + tail
        return [[_now_panel(words, w)]] + _lanes(n_ranks, state, sizes, step) + tail

    def links(max_w: float, where: dict) -> list[Link]:
        if algorithm == "tree":
            return _tree_sends(step)
        return _lane_sends(n_ranks, step) if stacked(max_w) else []

    title = label("fig.ri_title", algo=label("fig.ri_" + algorithm), n=fmt.integer(n_ranks), s=fmt.integer(current),
                  t=fmt.integer(len(sched.steps)))
    return figure_at("ring", title, rows_at, links=links)
