"""Figures of the collectives (page 1, sections ``collectives`` and ``mismatch``).

``collectives``: NCCL's picture of a collective.  One lane per rank: the input buffer
("before") on the left, the output buffer ("after") on the right, and between them what
moves.  A buffer is drawn in the blocks the collective moves (one block per rank when the
record says ``splits_input``, as AlltoAll, ReduceScatter and Scatter; AllGather and Gather
deliver one block per rank), one block per row, so every block has its own arrow.  Cells are tinted by the rank the data
came from and framed by the rank that holds it; a reduction's inputs are *partial* terms
(dashed frames) and its output is *final* (its own fill): every input enters the reduction
node, the result leaves it.

Which block went where is read off the core's result, not restated here: the example
buffers are all distinct (rank r holds 10^r·[1, …, L]), so an output block that equals an
input block came from it.  Only a reduction (``Collective.reduces``) creates new values.

``mismatch``: one lane per rank, its calls in order (a column each on a desktop, one a line on
a phone); completed collectives are joined across the lanes, calls that met with different
arguments are joined by a broken bond, and a rank that waits forever points at the peer it
waits for.  The connectors are drawn where the kit's flow put the calls.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from .. import collectives as core
from ..collectives import CollectiveResult
from .. import mismatch
from .. import fmt
from .draw import (CAP_H, PAD, ROW_H, Panel, Row, arrow, badge, badge_panel, cell_w, curve, flow, group, label, line,
                   mid_text, pair, rank_attrs, rank_name, rect, text)

_OP_SYMBOL = {"sum": "Σ", "avg": "Σ ÷ n", "max": "max", "min": "min", "prod": "Π"}
BLOCK_GAP = 4.0          # between the blocks of one buffer
LANE_GAP = 12.0          # between the lanes of two ranks
BADGE_W = 30.0
NOTHING_W = 72.0         # the dashed box of a rank that receives nothing
OP_W = 44.0              # a reduction node
HEAD_H = 56.0
HEAD_W = 240.0           # room for "before …" on the left and "after …" on the right            # the collective's name and the column heads above the lanes


def _blocks(buf: np.ndarray, size: int) -> list[np.ndarray]:
    return [buf[k:k + size] for k in range(0, buf.size, size)]


@lru_cache(maxsize=512)
def _num(v: float) -> str:
    """fmt.num, remembered: a figure formats each number for both drawings and their widths."""
    return fmt.num(v)


def _divisors(length: int) -> list[int]:
    return [d for d in range(1, length + 1) if length % d == 0]


def _rows(blocks: int, size: int, per_row: int) -> float:
    """Height of ``blocks`` stacked blocks of ``size`` cells, ``per_row`` cells a row."""
    return max(blocks * (size // per_row) * ROW_H + (blocks - 1) * BLOCK_GAP, ROW_H)


def _buffer(blocks: list[np.ndarray], per_row: int, cw: float, who: str, rank: int, tint: list,
            frame_cls: str) -> tuple[list[dict], list[float], float]:
    """A buffer as stacked blocks of ``per_row`` cells; returns (nodes, block centre ys, height).

    ``tint[b]``: the rank the data of block b came from (None: a reduction's result).
    Cell data-keys are ``who.rank.offset`` with the element's offset in the NCCL buffer.
    """
    nodes, mids, y, offset = [], [], 0.0, 0
    for b, block in enumerate(blocks):
        rows = -(-block.size // per_row)
        src = tint[b]
        cell_cls = "cell v2" if src is not None else "cell fin"
        cell_attrs = rank_attrs(src, cell_cls) if src is not None else {"class": cell_cls}
        for e, v in enumerate(block):
            cx, cy = (e % per_row) * cw, y + (e // per_row) * ROW_H
            nodes.append(rect(cx, cy, cw, ROW_H, cell_attrs))
            nodes.append(mid_text(cx + cw / 2, cy + ROW_H / 2, _num(v), "num" if src is not None else "num fin",
                                  **{"data-key": f"{who}.{rank}.{offset + e}"}))
        nodes.append(rect(0, y, min(block.size, per_row) * cw, rows * ROW_H, rank_attrs(rank, frame_cls)))
        mids.append(y + rows * ROW_H / 2)
        offset += block.size
        y += rows * ROW_H + BLOCK_GAP
    return nodes, mids, y - BLOCK_GAP


def _provenance(blocks_in: list[list[np.ndarray]], out_blocks: list[np.ndarray]) -> list[tuple[int, int] | None]:
    """For each output block, the (rank, block) of the input it copies (the inputs are distinct)."""
    found = []
    for ob in out_blocks:
        src = [(i, b) for i, bl in enumerate(blocks_in) for b, ib in enumerate(bl)
               if ib.shape == ob.shape and np.array_equal(ib, ob)]
        found.append(src[0] if src else None)
    return found


def _plan(res: CollectiveResult) -> dict:
    """Blocks, provenance and participation of a collective result (no geometry).

    ``src`` of an output block: ("copy", rank, block) of the input it equals, or ("op", k) for
    block k of a reduction (ReduceScatter: rank j's block is block j; otherwise block 0).
    """
    name, nr = res.name, res.n
    inputs = [np.asarray(b, dtype=np.float64).ravel() for b in res.inputs]
    length = inputs[0].size
    spec = core.REGISTRY[name]
    size = length // nr if spec.splits_input else length          # the block a collective moves
    blocks_in = [_blocks(b, size) for b in inputs]
    reduces = spec.reduces
    lanes = []
    for j, out in enumerate(res.outputs):
        used = not spec.reads_root_input_only or j == res.root
        if out is None:
            lanes.append({"in_used": used, "out": None, "src": []})
            continue
        ob = _blocks(np.asarray(out, dtype=np.float64).ravel(), size)
        if reduces:
            src = [("op", j if spec.splits_input else s) for s in range(len(ob))]
        else:
            src = [("copy",) + found if found else None for found in _provenance(blocks_in, ob)]
        lanes.append({"in_used": used, "out": ob, "src": src})
    return {"blocks_in": blocks_in, "lanes": lanes, "reduces": reduces, "size": size,
            "op_blocks": len(blocks_in[0]) if reduces else 0}


def _fit(plan: dict, cw_in: float, cw_out: float, band: float, max_w: float) -> tuple[int, int, float, float]:
    """Cells per row of the input and output blocks: the lowest drawing that fits ``max_w``
    (a block wraps onto rows of a divisor of its length)."""
    best = None
    size = plan["size"]
    least_out = NOTHING_W if any(not ln["out"] for ln in plan["lanes"]) else 0.0   # room for "nothing"
    for per_in in _divisors(size):
        for per_out in _divisors(size):
            w_in, w_out = per_in * cw_in, max(per_out * cw_out, least_out)
            width = PAD + BADGE_W + 8 + w_in + band + w_out + PAD
            height = sum(max(_rows(len(bl), size, per_in), _rows(len(ln["out"] or []), size, per_out))
                         for bl, ln in zip(plan["blocks_in"], plan["lanes"]))
            order = (width > max_w, height if width <= max_w else width, -width)
            if best is None or order < best[0]:
                best = (order, per_in, per_out, w_in, w_out)
    return best[1:]


def _lane(plan: dict, r: int, per_in: int, per_out: int, cw_in: float, cw_out: float):
    """Rank r's input and output drawings: (in nodes, in block mids, out nodes, out block mids, height)."""
    ln = plan["lanes"][r]
    blocks = plan["blocks_in"][r]
    in_nodes, in_mid, in_h = _buffer(blocks, per_in, cw_in, "in", r, [r] * len(blocks),
                                     "frame part" if plan["reduces"] else "frame")
    if ln["out"] is None:
        out_nodes = [rect(0, 0, NOTHING_W, ROW_H, {"class": "nothing"}, rx="3"),
                     mid_text(NOTHING_W / 2, ROW_H / 2, label("fig.co_nothing"), "dimtext")]
        return in_nodes, in_mid, out_nodes, [], max(in_h, ROW_H)
    tint = [s[1] if s[0] == "copy" else None for s in ln["src"]]
    out_nodes, out_mid, out_h = _buffer(ln["out"], per_out, cw_out, "out", r, tint, "frame")
    return in_nodes, in_mid, out_nodes, out_mid, max(in_h, out_h)


def _reductions(plan: dict, op: str, ports_in: dict, ports_out: dict, x_mid: float, top: float,
                bottom: float) -> list[dict]:
    """The reduction node(s) and the arrows into and out of them.

    One block (AllReduce, Reduce): one node across all lanes, every input enters it straight.
    ReduceScatter: one node per block k, beside rank k's output; block k of every rank enters it.
    """
    nodes, centre = [], {}
    if plan["op_blocks"] == 1:
        nodes.append(rect(x_mid - OP_W / 2, top - 4, OP_W, bottom - top + 8, {"class": "coll"}, rx="6"))
        nodes.append(mid_text(x_mid, (top + bottom) / 2, _OP_SYMBOL[op], "coll-t"))
    else:
        for (j, s), (_, py) in ports_out.items():
            k = plan["lanes"][j]["src"][s][1]
            centre[k] = py
            nodes.append(rect(x_mid - OP_W / 2, py - 12, OP_W, 24, {"class": "coll"}, rx="5"))
            nodes.append(mid_text(x_mid, py, _OP_SYMBOL[op], "coll-t"))
    for (i, b), (px, py) in sorted(ports_in.items()):
        if centre:
            edge = curve(px + 2, py, x_mid - OP_W / 2, centre[b], "mv", "mvh", rank=i)
        else:
            edge = arrow(px + 2, py, x_mid - OP_W / 2, py, "mv", "mvh", rank=i)
        nodes.append(group(edge, part=f"op.in.{i}.{b}"))
    for (j, s), (px, py) in sorted(ports_out.items()):
        k = plan["lanes"][j]["src"][s][1]
        nodes.append(group(arrow(x_mid + OP_W / 2, py, px - 2, py, "mv fin", "mvh fin"), part=f"op.out.{k}.{j}.{s}"))
    return nodes


def _copies(plan: dict, ports_in: dict, ports_out: dict) -> list[dict]:
    """One arrow per copied block, from where it was to where it lands, in its source's tint."""
    nodes = []
    for j, ln in enumerate(plan["lanes"]):
        for s, src in enumerate(ln["src"]):
            if src is None or src[1:] not in ports_in:
                continue
            (x1, y1), (x2, y2) = ports_in[src[1:]], ports_out[(j, s)]
            nodes.append(group(curve(x1 + 2, y1, x2 - 2, y2, "mv", "mvh", rank=src[1]),
                               part=f"mv.{src[1]}.{src[2]}.{j}.{s}"))
    return nodes


def _draw_collective(res: dict, plan: dict, max_w: float) -> tuple[list[dict], float, float]:
    in_strings = [_num(v) for bl in plan["blocks_in"] for b in bl for v in b]
    out_strings = [_num(v) for ln in plan["lanes"] for b in ln["out"] or [] for v in b]
    cw_in, cw_out = cell_w(in_strings), cell_w(out_strings)
    # The band between the buffers: room for the arrows to cross (and the reduction nodes).
    least = {0: 76.0, 1: 2 * 24 + OP_W}.get(plan["op_blocks"], 64 + OP_W + 28)
    per_in, per_out, w_in, w_out = _fit(plan, cw_in, cw_out, least, max_w)
    room = max_w - (PAD + BADGE_W + 8 + w_in + w_out + PAD)
    least = max(min(least, 2 * 24 + OP_W), min(least, room))   # a phone column: the arrows cross more steeply
    band = max(least, min(room, least + (84.0 if plan["op_blocks"] != 1 else 24.0)))
    # the two column heads side by side (in a phone drawing as much of HEAD_W as the column has:
    # the estimate is generous)
    band = max(band, min(HEAD_W, max_w - (PAD + BADGE_W + 8) - PAD) - w_in - w_out)
    x_in = PAD + BADGE_W + 8
    x_band = x_in + w_in
    x_out = x_band + band
    width = x_out + w_out + PAD

    back, lanes, ports_in, ports_out, y = [], [], {}, {}, HEAD_H
    for r in range(res.n):
        in_nodes, in_mid, out_nodes, out_mid, h = _lane(plan, r, per_in, per_out, cw_in, cw_out)
        back.append(rect(PAD - 4, y - 4, width - 2 * PAD + 8, h + 8, rank_attrs(r, "lane"), rx="6"))
        lanes.append(group(badge(r, PAD, y), part=f"rank{r}"))
        lanes.append(group(in_nodes, part=f"in{r}", cls=None if plan["lanes"][r]["in_used"] else "dim",
                           dx=x_in, dy=y))
        lanes.append(group(out_nodes, part=f"out{r}", dx=x_out, dy=y))
        if plan["lanes"][r]["in_used"]:
            ports_in.update({(r, b): (x_band, y + m) for b, m in enumerate(in_mid)})
        ports_out.update({(r, s): (x_out, y + m) for s, m in enumerate(out_mid)})
        y += h + LANE_GAP
    bottom = y - LANE_GAP

    if plan["reduces"]:
        moves = _reductions(plan, res.op, ports_in, ports_out, x_out - 28 - OP_W / 2, HEAD_H, bottom)
    else:
        moves = _copies(plan, ports_in, ports_out)
    name = (label("fig.co_root", name=res.nccl_name, root=rank_name(res.root)) if res.uses_root
            else res.nccl_name)
    head = [text(x_band + band / 2, 14, name, "coll-t", "middle"),
            text(x_in, 32, label("fig.co_before"), "cap"),
            text(x_in, 46, label("fig.co_partial" if plan["reduces"] else "fig.co_own"), "dimtext"),
            text(x_out + w_out, 32, label("fig.co_after"), "cap", "end"),
            text(x_out + w_out, 46, label("fig.co_final" if plan["reduces"] else "fig.co_from"), "dimtext", "end")]
    return back + head + moves + lanes, width, bottom + PAD


def plan_collective(res: CollectiveResult) -> dict:
    """What the figure draws of a core result: blocks, where each output block came from."""
    return _plan(res)


def output_sources(plan: dict) -> list[list[int | None] | None]:
    """Per rank, the rank each element of its output came from (None: a reduction's result),
    or None for a rank that receives nothing: the tint of the figure's output cells, which the
    table's output grids repeat."""
    out = []
    for ln in plan["lanes"]:
        if ln["out"] is None:
            out.append(None)
            continue
        out.append([src[1] if src is not None and src[0] == "copy" else None
                    for src, block in zip(ln["src"], ln["out"]) for _ in range(block.size)])
    return out


def figure_collective(res: CollectiveResult, plan: dict | None = None) -> dict:
    """The ``collectives`` figure of one core result (``collectives.run_collective``)."""
    plan = _plan(res) if plan is None else plan
    title = label("fig.co_title", name=res.nccl_name, n=fmt.integer(res.n))
    return pair("collectives", title, lambda w: _draw_collective(res, plan, w))


# ---------------------------------------------------------------- mismatch

BOX_W, BOX_H = 104.0, 46.0      # one call: name, count and dtype, group
STATE_H = 16.0                  # the line under a call that never completes
TRACK = 10.0                    # between two connectors in a gutter
BOX_INSET = 8.0                 # a call's words from its box's left edge
CALL_LINES_Y = (15.0, 29.0, 41.0)   # their baselines below the box's top: name, count · dtype, group
MM_LANE_GAP = 10.0


def _call_lines(call: dict) -> list:
    shape = "[" + ", ".join(fmt.integer(v) for v in call["shape"]) + "]"
    group_ = "{" + ",".join(fmt.integer(g) for g in call["group"]) + "}"
    return [core.NCCL_NAMES.get(call["name"], "Barrier"), f"{shape} · {call['dtype']}", label("fig.mm_group", g=group_)]


def _outcome(seqs: list, res: mismatch.MismatchResult) -> dict:
    """Where every rank ends (its call index, or len(calls) once it has returned), which stuck
    ranks met their group with different arguments, and the connectors to draw."""
    hangs = {h.rank: h for h in res.hangs}
    pos = {r: hangs[r].call_index if r in hangs else len(seq) for r, seq in enumerate(seqs)}

    def met(r: int) -> bool:
        mine = seqs[r][pos[r]]
        return r in mine["group"] and all(pos[g] < len(seqs[g]) and seqs[g][pos[g]]["group"] == mine["group"]
                                          for g in mine["group"])
    bonds = [("ok", sorted((int(g), i) for g, i in c.call_index.items())) for c in res.completed]
    waits, seen = [], set()
    for r, h in sorted(hangs.items()):
        if met(r):
            members = seqs[r][pos[r]]["group"]
            if members not in seen:
                seen.add(members)
                bonds.append(("bad", [(g, pos[g]) for g in members]))
        elif h.peer is not None:
            waits.append(((r, pos[r]), (h.peer, pos[h.peer])))
    return {"pos": pos, "hangs": hangs, "met": {r for r in hangs if met(r)}, "bonds": bonds, "waits": waits}


def _spans(out: dict) -> list[int]:
    """The last call each connector (bonds, then waits) joins: the column whose gutter it runs in."""
    return ([max(i for _, i in members) for _, members in out["bonds"]]
            + [max(src[1], dst[1]) for src, dst in out["waits"]])


def _tracks(spans: list[int], one_gutter: bool) -> list[int]:
    """The track of every connector in its gutter: its index among the connectors of its column,
    or, where the calls are stacked (one gutter for all of them), among all connectors."""
    seen: dict[int, int] = {}
    tracks = []
    for c in spans:
        c = 0 if one_gutter else c
        tracks.append(seen.get(c, 0))
        seen[c] = tracks[-1] + 1
    return tracks


def _call_box(r: int, i: int, call: dict, state: str, w: float, head: Any) -> Panel:
    """One call: its box (name, count and dtype, group), what became of it under the box, and
    ``head`` (the call's index, where the columns have no heads) above it; ``w``: the box and the
    gutter of connectors right of it."""
    top = CAP_H if head is not None else 0.0
    lines = _call_lines(call)
    nodes = [rect(0, top, BOX_W, BOX_H, rank_attrs(r, "call " + state), rx="5")]
    nodes += [text(BOX_INSET, top + y, cell, cls) for cell, y, cls in zip(lines, CALL_LINES_Y, ("call-t", "dimtext", "dimtext"))]
    if state == "never":
        # the call that is never reached is faded; the words under it that say so are not (they
        # are read, so they keep their contrast: axe in tests/test_a11y_browser.py)
        nodes = [group(nodes, cls="dim")]
    under = {"wait": ("mm_waits", "warn-t"), "bad": ("mm_differ", "warn-t"), "never": ("mm_never", "dimtext")}
    if state in under:
        k, cls = under[state]
        nodes.append(text(2, top + BOX_H + STATE_H - 4, label("fig." + k), cls))
    if head is not None:
        nodes.append(text(0, 12, head, "cap"))
    return Panel(w, top + BOX_H + STATE_H, nodes, part=f"call.{r}.{i}")


def _exit_panel(r: int, w: float, top: float) -> Panel:
    """Where a rank that returned from all its calls ends: a pill level with its calls' centres."""
    y = top + BOX_H / 2
    return Panel(w, top + BOX_H + STATE_H, [rect(0, y - 12, EXIT_W, 24, {"class": "exitp"}, rx="12"),
                                            mid_text(EXIT_W / 2, y, label("fig.mm_exit"), "dimtext")], part=f"exit.{r}")


def _connectors(out: dict, tracks: list[int], where: dict, top: float) -> list[dict]:
    """Bonds (a met collective: ✓ completed, ✗ arguments differ) and wait arrows, each on its own
    vertical track in the gutter right of the last call it joins."""
    def box(r: int, i: int) -> tuple[float, float, float]:
        """(left, right, centre y) of call i of rank r (i = its number of calls: its exit)."""
        x, y = where[f"call.{r}.{i}"] if i < len(out["seqs"][r]) else where[f"exit.{r}"]
        return x, x + (BOX_W if i < len(out["seqs"][r]) else EXIT_W), y + top + BOX_H / 2

    def track(members, t: int) -> float:
        return max(box(r, i)[0] for r, i in members) + BOX_W + TRACK_GAP + TRACK * t

    nodes = []
    for (kind, members), t in zip(out["bonds"], tracks):
        tx = track(members, t)
        ys = [box(r, i)[2] for r, i in members]
        parts = [line(box(r, i)[1], box(r, i)[2], tx, box(r, i)[2], "bond " + kind) for r, i in members]
        parts.append(line(tx, min(ys), tx, max(ys), "bond " + kind))
        parts.append(mid_text(tx, min(ys) - 9, "✓" if kind == "ok" else "✗", "ok-t" if kind == "ok" else "warn-t"))
        nodes.append(group(parts, part="bond." + ".".join(f"{r}-{i}" for r, i in members)))
    for ((r, i), (g, j)), t in zip(out["waits"], tracks[len(out["bonds"]):]):
        tx = track([(r, i), (g, j)], t)
        y1, y2 = box(r, i)[2] - 6, box(g, j)[2] + 6
        parts = [line(box(r, i)[1], y1, tx, y1, "waitline"), line(tx, y1, tx, y2, "waitline"),
                 *arrow(tx, y2, box(g, j)[1] + 1, y2, "waitline", "arrowhead waitline")]
        nodes.append(group(parts, part=f"wait.{r}.{g}"))
    return nodes


EXIT_W = 54.0
TRACK_GAP = 14.0        # from a call's box to the first track of its gutter
LANE_BADGE_W = 36.0     # draw.badge_panel
LANE_INNER = 6.0        # flow: a lane's panels start this far inside its edge (the heads above are not in a lane)


def _mismatch_drawing(seqs: list, out: dict, max_w: float) -> tuple[list[dict], float, float]:
    """The calls of every rank in a lane: one column per call on a desktop (the index above it);
    on a phone one call a line under the rank's badge, one gutter of connectors right of them all."""
    cols = max(len(seq) + (1 if out["pos"][r] >= len(seq) else 0) for r, seq in enumerate(seqs))
    spans = _spans(out)

    def gutter_w(tracks: int) -> float:          # a call's box and the tracks right of it
        return BOX_W + TRACK_GAP + TRACK * max(tracks - 1, 0) + 4
    col_w = [gutter_w(spans.count(c)) for c in range(cols)]
    stacked = PAD + LANE_BADGE_W + sum(w + 10 for w in col_w) + 2 * LANE_INNER + PAD > max_w
    if stacked:
        col_w = [gutter_w(len(spans))] * cols
    tracks = _tracks(spans, one_gutter=stacked)
    top = CAP_H if stacked else 0.0
    rows = [] if stacked else [[Panel(LANE_BADGE_W + LANE_INNER, CAP_H - 4)] +
                               [Panel(col_w[c], CAP_H - 4, [text(0, 12, label("fig.mm_call", i="#" + fmt.integer(c)), "cap")])
                                for c in range(max(len(seq) for seq in seqs))]]
    for r, seq in enumerate(seqs):
        panels = [badge_panel(r, top + BOX_H, top + BOX_H / 2 - 11)]
        for i, call in enumerate(seq):
            state = ("done" if i < out["pos"][r] else "never" if i > out["pos"][r]
                     else "bad" if r in out["met"] else "wait")
            head = label("fig.mm_call", i="#" + fmt.integer(i)) if stacked else None
            panels.append(_call_box(r, i, call, state, col_w[i], head))
        if out["pos"][r] >= len(seq):
            panels.append(_exit_panel(r, col_w[len(seq)], top))
        rows.append(Row(panels, rank=r, hang=True))
    where: dict = {}
    nodes, w, h = flow(rows, max_w, row_gap=MM_LANE_GAP, where=where)
    return nodes + _connectors(out, tracks, where, top), w, h


def figure_mismatch(calls: list, res: mismatch.MismatchResult) -> dict:
    """The ``mismatch`` figure: each rank's calls, how they met, where each rank stops."""
    seqs = mismatch.validate_calls(calls)
    out = _outcome(seqs, res)
    out["seqs"] = seqs
    title = label("fig.mm_title", n=fmt.integer(len(seqs)))
    return pair("mismatch", title, lambda max_w: _mismatch_drawing(seqs, out, max_w))
