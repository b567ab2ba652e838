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
waits for.  In both the kit's flow places the lanes and the connectors join the ports it
recorded.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from .. import collectives as core
from ..collectives import CollectiveResult
from .. import mismatch
from .. import fmt
from .draw import (CAP_H, FLOW_GAP, LANE_INNER, PAD, ROW_H, Cell, Link, Panel, Row, badge_panel, cell_block, cell_w,
                   column, figure_at, flowed, label, rank_name, text_box, words)

_OP_SYMBOL = {"sum": "Σ", "avg": "Σ ÷ n", "max": "max", "min": "min", "prod": "Π"}
BLOCK_GAP = 4.0          # between the blocks of one buffer
BADGE_W = 30.0
NOTHING_W = 72.0         # the dashed box of a rank that receives nothing
OP_W = 44.0              # a reduction node
OP_GAP = 28.0            # from a reduction node to the outputs
HEAD_W = 240.0           # room for "before …" on the left and "after …" on the right
LANE_GAP = 4.0           # between the lanes of two ranks (their edges)
GAP = FLOW_GAP - 2       # between a lane's panels: a phone column holds one more cell a row
AROUND = 2 * PAD + 2 * LANE_INNER + BADGE_W + GAP    # a lane's width beside its buffers and band
# the least band on a phone: the reduction node and an arrow either side; for copies, their curves
BAND_LEAST, COPY_LEAST = 2 * 18 + OP_W, 64.0


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
            frame_cls: str, cls: str = "") -> Panel:
    """A buffer as stacked blocks of ``per_row`` cells, each framed by the rank that holds it (its
    ports: ``who.rank.block.left`` / ``.right``).

    ``tint[b]``: the rank the data of block b came from (None: a reduction's result).
    Cell data-keys are ``who.rank.offset`` with the element's offset in the NCCL buffer.
    """
    panels, offset = [], 0
    for b, block in enumerate(blocks):
        src = tint[b]
        cells = [Cell("cell v2" if src is not None else "cell fin", _num(v), src, "num" if src is not None else "num fin",
                      key=f"{who}.{rank}.{offset + e}") for e, v in enumerate(block)]
        panels.append(cell_block(cells, per_row, cw, ROW_H, (rank, frame_cls), part=f"{who}.{rank}.{b}"))
        offset += block.size
    return column(panels, gap=BLOCK_GAP, part=f"{who}{rank}", cls=cls)


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
            width = AROUND + w_in + band + w_out
            height = sum(max(_rows(len(bl), size, per_in), _rows(len(ln["out"] or []), size, per_out))
                         for bl, ln in zip(plan["blocks_in"], plan["lanes"]))
            order = (width > max_w, height if width <= max_w else width, -width)
            if best is None or order < best[0]:
                best = (order, per_in, per_out, w_in, w_out)
    return best[1:]


def _lane(plan: dict, r: int, per_in: int, per_out: int, cw_in: float, cw_out: float, band: float) -> Row:
    """Rank r's lane: its badge, its input, the band the data crosses (the reduction's ports
    ``hub.r`` / ``hub.r.end`` on its upright), its output."""
    ln = plan["lanes"][r]
    blocks = plan["blocks_in"][r]
    inp = _buffer(blocks, per_in, cw_in, "in", r, [r] * len(blocks), "frame part" if plan["reduces"] else "frame",
                  cls="" if ln["in_used"] else "dim")
    if ln["out"] is None:
        out = text_box([(label("fig.co_nothing"), "dimtext")], NOTHING_W, ROW_H, "nothing", rx=3, part=f"out{r}")
    else:
        out = _buffer(ln["out"], per_out, cw_out, "out", r, [s[1] if s[0] == "copy" else None for s in ln["src"]],
                      "frame")
    h = max(inp.h, out.h)
    # the band is the gaps either side and the room between; the reduction node OP_GAP before the
    # outputs, or midway where the band is narrower (a phone)
    hub = band - GAP - min(OP_GAP, (band - OP_W) / 2) - OP_W / 2
    room = Panel(band - 2 * GAP, h, ports={f"hub.{r}": (hub, 0.0), f"hub.{r}.end": (hub, h)})
    return Row([badge_panel(r, h, 0, ROW_H, BADGE_W, w=BADGE_W), inp, room, out], rank=r)


def _reductions(plan: dict, op: str, n: int) -> list[Link]:
    """The reduction node(s) and the arrows into and out of them.

    One block (AllReduce, Reduce): one node across all lanes, every input enters it straight.
    ReduceScatter: one node per block k, beside rank k's output; block k of every rank enters it.
    """
    sym = _OP_SYMBOL[op]
    outs = [(j, s, src[1]) for j, ln in enumerate(plan["lanes"]) if ln["out"] for s, src in enumerate(ln["src"])]
    if plan["op_blocks"] == 1:
        links = [Link("node", ("hub.0", f"hub.{n - 1}.end"), "coll", label=sym, label_cls="coll-t", gap=4, w=OP_W)]
    else:
        links = [Link("node", (f"out.{j}.{s}.left",), "coll", label=sym, label_cls="coll-t", via=(f"hub.{j}",), w=OP_W,
                      h=24) for j, s, _ in outs]
    where_k = {k: f"out.{j}.{s}.left" for j, s, k in outs}
    for i, bl in enumerate(plan["blocks_in"]):
        for b in range(len(bl)):
            part = f"op.in.{i}.{b}"
            if plan["op_blocks"] == 1:          # straight into the one node, at the input's height
                links.append(Link("arrow", (f"in.{i}.{b}.right", f"hub.{i}"), "mv", "mvh", rank=i, part=part,
                                  gap=(2, OP_W / 2), level=0))
            else:                               # across to block b's node, beside its output
                links.append(Link("curve", (f"in.{i}.{b}.right", where_k[b]), "mv", "mvh", rank=i, part=part,
                                  gap=(2, OP_GAP + OP_W)))
    links += [Link("arrow", (f"hub.{j}", f"out.{j}.{s}.left"), "mv fin", "mvh fin", part=f"op.out.{k}.{j}.{s}",
                   gap=(OP_W / 2, 2), level=1) for j, s, k in outs]
    return links


def _copies(plan: dict) -> list[Link]:
    """One arrow per copied block, from where it was to where it lands, in its source's tint."""
    return [Link("curve", (f"in.{src[1]}.{src[2]}.right", f"out.{j}.{s}.left"), "mv", "mvh", rank=src[1], gap=2,
                 part=f"mv.{src[1]}.{src[2]}.{j}.{s}")
            for j, ln in enumerate(plan["lanes"]) for s, src in enumerate(ln["src"])
            if src is not None and plan["lanes"][src[1]]["in_used"]]


def _head(res: CollectiveResult, reduces: bool, w_in: float, band: float, w_out: float) -> Panel:
    """The collective's name over the band, "before" over the inputs and "after" over the outputs
    (from the lanes' insets: the heads may take them)."""
    name = (label("fig.co_root", name=res.nccl_name, root=rank_name(res.root)) if res.uses_root
            else res.nccl_name)
    full, left = w_in + band + w_out + 2 * LANE_INNER, LANE_INNER + w_in + band / 2

    def ends(a: Any, b: Any, cls: str) -> Panel:
        return flowed([[words(a, left, cls), words(b, full - left, cls, "end")]], full, gap=0)
    return column([flowed([[Panel(LANE_INNER + w_in, 1), words(name, band, "coll-t", "middle")]], full, gap=0),
                   ends(label("fig.co_before"), label("fig.co_after"), "cap"),
                   ends(label("fig.co_partial" if reduces else "fig.co_own"),
                        label("fig.co_final" if reduces else "fig.co_from"), "dimtext")], gap=0)


def _collective_rows(res: CollectiveResult, plan: dict, max_w: float) -> list:
    in_strings = [_num(v) for bl in plan["blocks_in"] for b in bl for v in b]
    out_strings = [_num(v) for ln in plan["lanes"] for b in ln["out"] or [] for v in b]
    cw_in, cw_out = cell_w(in_strings), cell_w(out_strings)
    # The band between the buffers: room for the arrows to cross (and the reduction nodes).
    least = {0: 76.0, 1: 2 * 24 + OP_W}.get(plan["op_blocks"], 64 + OP_W + OP_GAP)
    floor = min(least, COPY_LEAST if plan["op_blocks"] == 0 else BAND_LEAST)   # a phone: arrows cross more steeply
    # (a ReduceScatter's curves cross to other lanes' nodes: its cells give way to them, but for
    # the lanes' insets)
    per_in, per_out, w_in, w_out = _fit(plan, cw_in, cw_out, least - 2 * LANE_INNER if plan["op_blocks"] > 1 else floor,
                                        max_w)
    room = max_w - (AROUND + w_in + w_out)
    least = max(floor, min(least, room))
    band = max(least, min(room, least + (84.0 if plan["op_blocks"] != 1 else 24.0)))
    # the two column heads side by side (in a phone drawing as much of HEAD_W as the column has:
    # the estimate is generous)
    band = max(band, min(HEAD_W - 2 * LANE_INNER, max_w - AROUND) - w_in - w_out)
    return ([[Panel(BADGE_W, 1), _head(res, plan["reduces"], w_in, band, w_out)]]      # the heads from the lane's inset
            + [_lane(plan, r, per_in, per_out, cw_in, cw_out, band) for r in range(res.n)])


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
    moves = _reductions(plan, res.op, res.n) if plan["reduces"] else _copies(plan)
    return figure_at("collectives", title, lambda w: _collective_rows(res, plan, w), links=lambda w, where: moves,
                     row_gap=LANE_GAP, gap=GAP)


# ---------------------------------------------------------------- mismatch

BOX_W, BOX_H = 104.0, 46.0      # one call: name, count and dtype, group
TRACK = 10.0                    # between two connectors in a gutter
TRACK_GAP = 14.0                # from a call's box to the first track of its gutter
EXIT_W, EXIT_H = 54.0, 24.0     # the pill of a rank that returned from all its calls
STATE_H = 16.0                  # the line under a call that never completes
LANE_BADGE_W = 36.0             # draw.badge_panel
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
    under = {"wait": ("mm_waits", "warn-t"), "bad": ("mm_differ", "warn-t"), "never": ("mm_never", "dimtext")}.get(state)
    # the call that is never reached is faded; the words under it that say so are not (they are
    # read, so they keep their contrast: axe in tests/test_a11y_browser.py)
    return text_box(list(zip(_call_lines(call), ("call-t", "dimtext", "dimtext"))), BOX_W, BOX_H, "call " + state, r,
                    w=w, head=head, under=(label("fig." + under[0]), under[1]) if under else None,
                    faded=state == "never", h=(CAP_H if head is not None else 0.0) + BOX_H + STATE_H,
                    part=f"call.{r}.{i}")


def _exit_panel(r: int, w: float, top: float) -> Panel:
    """Where a rank that returned from all its calls ends: a pill level with its calls' centres."""
    return text_box([(label("fig.mm_exit"), "dimtext")], EXIT_W, EXIT_H, "exitp", rx=EXIT_H / 2,
                    top=top + (BOX_H - EXIT_H) / 2, w=w, h=top + BOX_H + STATE_H, part=f"exit.{r}")


def _connectors(out: dict, tracks: list[int]) -> list[Link]:
    """Bonds (a met collective: ✓ completed, ✗ arguments differ) and wait arrows, each on its own
    vertical track in the gutter right of the last call it joins."""
    def box(r: int, i: int) -> str:          # call i of rank r (i = its number of calls: its exit)
        return f"call.{r}.{i}" if i < len(out["seqs"][r]) else f"exit.{r}"

    def track(t: int) -> float:              # from the left of the farthest call it joins
        return BOX_W + TRACK_GAP + TRACK * t
    links = [Link("bus", tuple(box(r, i) + ".right" for r, i in members), "bond " + kind, None,
                  part="bond." + ".".join(f"{r}-{i}" for r, i in members), label="✓" if kind == "ok" else "✗",
                  label_cls="ok-t" if kind == "ok" else "warn-t", track=track(t),
                  via=tuple(box(r, i) + ".left" for r, i in members))
             for (kind, members), t in zip(out["bonds"], tracks)]
    links += [Link("elbow", (box(r, i) + ".right", box(g, j) + ".right"), "waitline", "arrowhead waitline",
                   part=f"wait.{r}.{g}", track=track(t), via=(box(r, i) + ".left", box(g, j) + ".left"))
              for ((r, i), (g, j)), t in zip(out["waits"], tracks[len(out["bonds"]):])]
    return links


def _mismatch_layout(seqs: list, out: dict, max_w: float) -> tuple[list, list[int], bool]:
    """The calls of every rank in a lane: one column per call on a desktop (the index above it);
    on a phone one call a line under the rank's badge, one gutter of connectors right of them all."""
    cols = max(len(seq) + (1 if out["pos"][r] >= len(seq) else 0) for r, seq in enumerate(seqs))
    spans = _spans(out)

    def gutter_w(tracks: int) -> float:          # a call's box and the tracks right of it
        return BOX_W + TRACK_GAP + TRACK * max(tracks - 1, 0) + 4
    col_w = [gutter_w(spans.count(c)) for c in range(cols)]
    stacked = 2 * PAD + LANE_BADGE_W + sum(w + FLOW_GAP for w in col_w) + 2 * LANE_INNER > max_w
    if stacked:
        col_w = [gutter_w(len(spans))] * cols
    top = CAP_H if stacked else 0.0
    rows = [] if stacked else [[Panel(LANE_BADGE_W + LANE_INNER, 1)] +
                               [words(label("fig.mm_call", i="#" + fmt.integer(c)), col_w[c], "cap")
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
    return rows, _tracks(spans, one_gutter=stacked), stacked


def figure_mismatch(calls: list, res: mismatch.MismatchResult) -> dict:
    """The ``mismatch`` figure: each rank's calls, how they met, where each rank stops."""
    seqs = mismatch.validate_calls(calls)
    out = _outcome(seqs, res)
    out["seqs"] = seqs
    title = label("fig.mm_title", n=fmt.integer(len(seqs)))
    layouts: dict = {}          # per drawing width: its rows, then its connectors

    def rows_at(max_w: float) -> list:
        rows, tracks, _ = layouts[max_w] = _mismatch_layout(seqs, out, max_w)
        return rows
    return figure_at("mismatch", title, rows_at, links=lambda max_w, where: _connectors(out, layouts[max_w][1]),
                     row_gap=MM_LANE_GAP)

