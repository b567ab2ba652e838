"""Views of the collectives (page 1): data layouts, a hang checker, ring/tree traffic.

Sections
--------
``collectives``  one NCCL collective on the seed's buffers (table ``collective``:
                 Rank | input | output) and ReduceScatter → AllGather next to
                 AllReduce, computed (table ``rs-ag``).
``mismatch``     per-rank call lists of a named scenario and what each rank ends
                 up doing (tables ``mismatch-calls``, ``mismatch-hangs``).
``ring``         the steps of a ring or tree AllReduce (``ring-steps``) and the
                 messages and bytes per rank (``ring-bytes``).

Letters: n ranks, count elements per rank, root the sending/receiving rank.
Inputs: :func:`tpmath.collectives.example_inputs`, rank r holds 10^r·[1, 2, …, L]
(the seed's R0=[1,2,3,4], R1=[10,20,30,40] for n = 2).
"""

from __future__ import annotations

import numpy as np

from .. import collectives as core
from .. import mismatch, schedules
from ..errors import TPMathError
from .. import fmt
from . import Control, Section, parse_controls
from . import tree
from .cells import label, rank, table
from .fig_collectives import figure_collective, figure_mismatch, output_sources, plan_collective
from .fig_schedules import figure_ring

RANK_OPTIONS = (2, 3, 4)
ROOT_OPTIONS = (0, 1, 2, 3)
RING_RANKS = tuple(range(2, 9))
RING_STEPS = tuple(range(0, 2 * (RING_RANKS[-1] - 1) + 1))   # the step control: 0 (before) … the most steps
MAX_COUNT = 2**30            # elements; bytes are counted, never allocated
SHOW_BUFFERS = (4, 8)        # buffers are listed per step only up to 4 ranks × 8 elements
ELEM_BYTES = 4               # float32


def _out(buf, r: int, scale: float, sources: list | None) -> dict:
    """Rank r's output buffer, or a note that the rank receives nothing (Reduce, Gather).

    As in the figure: framed by the rank that holds it, each number tinted by the rank it came
    from, a reduction's result grey."""
    return label("label.nothing") if buf is None else tree.grid(buf, rank=r, scale=scale, cols=sources)


def render_collectives(controls: dict, lang: str) -> dict:
    """One collective on the seed's buffers, and ReduceScatter+AllGather vs AllReduce."""
    c = parse_controls(SECTIONS["collectives"].controls, controls)
    name, op, n, root = c["collective"], c["op"], c["ranks"], c["root"]
    if core.REGISTRY[name].root is not None and root >= n:
        raise TPMathError("root_not_in_group", "root", value=root, last=n - 1)
    inputs = core.example_inputs(n)
    res = core.run_collective(name, inputs, op=op, root=root)
    # One shading scale for inputs and outputs: a reduction's result reads darker than its inputs.
    top = tree.scale_of(*inputs, *(b for b in res.outputs if b is not None))
    plan = plan_collective(res)
    sources = output_sources(plan)
    rows = [[tree.rank_tag(r), tree.grid(inputs[r], rank=r, scale=top), _out(res.outputs[r], r, top, sources[r])]
            for r in range(n)]

    # ReduceScatter leaves block r of op(inputs) on rank r; AllGather puts rank r's block
    # back at offset r: the concatenation every rank then holds is the AllReduce result.
    rs = core.collective("reduce-scatter", inputs, op=op)            # n × (L/n,)
    ag = core.collective("all-gather", rs)                           # n × (L,)
    ar = core.collective("all-reduce", inputs, op=op)                # n × (L,)
    top = tree.scale_of(*ar)
    # Tinted as the collective table: reduced numbers grey, AllGather's block j from rank j.
    size = len(rs[0])
    reduced, gathered = [None] * size, tree.block_ranks(size * n, n)
    rs_rows = [[tree.rank_tag(r)] + [tree.grid(b[r], rank=r, scale=top, cols=cols)
                                     for b, cols in ((rs, reduced), (ag, gathered), (ar, reduced * n))]
               + [fmt.err(np.max(np.abs(ag[r] - ar[r])))] for r in range(n)]
    notes = {"what": label(core.REGISTRY[name].note_key, root=rank(root), op=op)}
    # Controls this collective ignores are disabled on the page, with the reason next to them.
    state = {}
    if not res.uses_op:
        state["op"] = {"disabled": True, "why": label("note.op_unused", op=op)}
    if not res.uses_root:
        state["root"] = {"disabled": True, "why": label("note.root_unused", name=res.nccl_name)}
    else:       # a root is one of the n ranks: the others are offered disabled, with the reason
        state["root"] = {"disabled": False, "options": {str(r): label("note.root_not_a_rank", last=rank(n - 1))
                                                        for r in ROOT_OPTIONS if r >= n}}
    return {
        "control_state": state,
        "controls": {"collective": name, "op": op, "ranks": str(n), "root": str(root)},
        "tables": {
            "collective": table("cap.collective", ["col.rank", "col.input", "col.output"], rows),
            "rs-ag": table("cap.rs_ag", ["col.rank", "col.rs_out", "col.ag_out", "col.ar_out", "col.max_abs_diff"],
                           rs_rows),
        },
        "values": {"nccl-name": res.nccl_name,
                   "bus-factor": fmt.num(schedules.bus_bandwidth_factor(name, n))},
        "notes": notes,
        "figures": {"collectives": figure_collective(res, plan)},
    }


def _call_text(call: dict) -> str:
    """AllReduce [4] float32 {0,1}: NCCL name, shape, dtype, group (language-neutral)."""
    shape = "[" + ", ".join(fmt.integer(s) for s in call["shape"]) + "]"
    group = "{" + ",".join(fmt.integer(g) for g in call["group"]) + "}"
    nccl = core.REGISTRY[call["name"]].nccl if call["name"] in core.REGISTRY else "Barrier"
    return f"{nccl} {shape} {call['dtype']} {group}"


def render_mismatch(controls: dict, lang: str) -> dict:
    """Each rank's calls in a scenario and, for every rank that never finishes, why."""
    scenario = parse_controls(SECTIONS["mismatch"].controls, controls)["scenario"]
    calls = mismatch.SCENARIOS[scenario]
    res = mismatch.check_calls(calls)
    hangs = {h.rank: h for h in res.hangs}
    rows = []
    for r, seq in enumerate(calls):
        # one call a line (a value cell keeps its line breaks): on a phone the column then wraps
        # a call at most once instead of into one-word lines
        listed = "\n".join(f"#{fmt.integer(i)} {_call_text(c)}" for i, c in enumerate(seq))
        state = (label("label.rank_waits", call="#" + fmt.integer(hangs[r].call_index)) if r in hangs
                 else label("label.rank_done", calls=fmt.integer(len(seq))))
        rows.append([tree.rank_tag(r), listed, state])
    hang_rows = [[tree.rank_tag(h.rank), "#" + fmt.integer(h.call_index), label(f"label.hang_{h.code}"),
                  h.message] for h in res.hangs]
    verdict = (label("note.mismatch_ok", matched=fmt.integer(res.matched)) if res.ok else
               label("note.mismatch_hang", matched=fmt.integer(res.matched),
                     stuck=fmt.integer(len(res.hangs))))
    return {
        "controls": {"scenario": scenario},
        "tables": {
            "mismatch-calls": table("cap.mismatch_calls", ["col.rank", "col.calls", "col.outcome"], rows),
            "mismatch-hangs": table("cap.mismatch_hangs", ["col.rank", "col.call", "col.problem", "col.explanation"],
                                    hang_rows),
        },
        "values": {"matched": fmt.integer(res.matched)},
        "notes": {"verdict": verdict, "story": label(f"note.scenario_{scenario}")},
        "figures": {"mismatch": figure_mismatch(calls, res)},
    }


def _bytes(n: int) -> str:
    """An exact byte count (the per-rank table is about counting, not rounding)."""
    return fmt.integer(n) + "\u00a0B"


def _transfers(step: schedules.Step) -> str:
    """R0→R1 [#3, 8 B] · …: source, destination, chunk, bytes of every message of a step.

    A message never breaks across lines (no-break spaces inside it): on a phone, beside the
    buffers' grid, the column wraps between messages only."""
    parts = [f"{rank(t.src)}→{rank(t.dst)}\u00a0[#{fmt.integer(t.chunk)},\u00a0{fmt.nbytes(t.bytes)}]"
             for t in step.transfers if t.elements > 0]
    return "\u00a0· ".join(parts) if parts else "—"


def render_ring(controls: dict, lang: str) -> dict:
    """Steps and per-rank traffic of ring or tree AllReduce of ``count`` float32 elements."""
    c = parse_controls(SECTIONS["ring"].controls, controls)
    n, algorithm, count, shown = c["ranks"], c["algorithm"], c["count"], c["step"]
    sched = schedules.all_reduce_schedule(n, count, ELEM_BYTES, algorithm)
    show = n <= SHOW_BUFFERS[0] and count <= SHOW_BUFFERS[1]
    buffers = None
    if show:
        # Run the schedule on real data (rank r holds 10^r·[1..count]) to show what moves.
        data = [np.arange(1, count + 1, dtype=np.float64) * 10.0 ** r for r in range(n)]   # n × (count,)
        sim = (schedules.simulate_ring_all_reduce if algorithm == "ring" else schedules.simulate_tree_all_reduce)(data)
        buffers = sim.steps
    # The step shown in the figure: the record's options are those of the most ranks, so the steps
    # this schedule has not are disabled with the reason; one that arrives anyway (a link, the
    # ranks lowered under it) is clamped, and a note says so.
    last = len(sched.steps)
    beyond = label("note.ring_step_beyond", steps=fmt.integer(last))
    state = {"step": {"disabled": False, "options": {str(s): beyond for s in RING_STEPS if s > last}}}
    clamped = None
    if shown > last:
        state["step"]["value"] = str(last)
        clamped = label("note.ring_step_clamped", step=fmt.integer(shown), steps=fmt.integer(last))
        shown = last
    step_bytes = [_bytes(sum(t.bytes for t in step.transfers if t.elements > 0)) for step in sched.steps]
    # One shading scale for every step: chunks darken as they collect contributions.
    top = tree.scale_of(*(b for bufs in buffers for b in bufs)) if buffers else 0.0
    step_rows = []
    for i, step in enumerate(sched.steps):
        cell = tree.rank_stack(buffers[i], scale=top) if buffers else label("label.buffers_hidden")
        number = fmt.integer(step.step + 1)
        step_rows.append([label("label.step_shown", step=number) if i + 1 == shown else number,
                          label(f"label.phase_{step.phase.replace('-', '_')}"), _transfers(step), step_bytes[i],
                          cell])
    byte_rows = [[tree.rank_tag(p.rank), fmt.integer(p.messages_sent), _bytes(p.bytes_sent),
                  fmt.integer(p.messages_received), _bytes(p.bytes_received)] for p in sched.per_rank]
    busiest = max(p.bytes_sent for p in sched.per_rank)
    values = {
        "steps": fmt.integer(len(sched.steps)),
        "buffer-bytes": _bytes(sched.bytes),
        "max-bytes-sent": _bytes(busiest),
        "sent-over-buffer": fmt.num(busiest / sched.bytes),
        "bus-factor": fmt.num(sched.bus_factor),
    }
    return {
        "controls": {"ranks": str(n), "algorithm": algorithm, "count": count, "step": str(shown)},
        "control_state": state,
        "tables": {
            "ring-steps": table("cap.ring_steps", ["col.step", "col.phase", "col.transfers", "col.step_bytes",
                                                   "col.buffers"], step_rows),
            "ring-bytes": table("cap.ring_bytes", ["col.rank", "col.messages_sent", "col.bytes_sent",
                                                   "col.messages_received", "col.bytes_received"], byte_rows),
        },
        "values": values,
        "notes": {"convention": label("note.ring_convention", count=fmt.integer(count),
                                      elem_bytes=fmt.integer(ELEM_BYTES), bytes=fmt.nbytes(sched.bytes)),
                  "algorithm": label(f"note.algorithm_{algorithm}"),
                  # always present (empty unless clamped): the page only rewrites the notes a result names
                  "ring-step-clamped": clamped or ""},
        "figures": {"ring": figure_ring(n, algorithm, sched, shown, step_bytes)},
    }


SECTIONS = {
    "collectives": Section(
        name="collectives",
        controls=(
            Control("collective", "select", "all-to-all", options=core.NAMES),
            Control("op", "select", "sum", options=core.OPS),
            Control("ranks", "select", "2", options=tuple(str(r) for r in RANK_OPTIONS), slider=True),
            Control("root", "select", "0", options=tuple(str(r) for r in ROOT_OPTIONS)),
        ),
        render=render_collectives,
        real=lambda c: [("collective", {"name": c["collective"], "ranks": c["ranks"],
                                        "op": c["op"] if core.REGISTRY[c["collective"]].reduces else None,
                                        "root": c["root"] if core.REGISTRY[c["collective"]].root else None})],
        tables=("collective", "rs-ag"),
        values=("nccl-name", "bus-factor"),
    ),
    "mismatch": Section(
        name="mismatch",
        controls=(Control("scenario", "select", "order_swapped", options=tuple(mismatch.SCENARIOS)),),
        render=render_mismatch,
        real=lambda c: [("mismatch", {"scenario": c["scenario"]})],
        tables=("mismatch-calls", "mismatch-hangs"),
        values=("matched",),
    ),
    "ring": Section(
        name="ring",
        controls=(
            Control("ranks", "select", "4", options=tuple(str(r) for r in RING_RANKS), slider=True),
            Control("algorithm", "select", "ring", options=schedules.ALGORITHMS),
            Control("count", "number", 8, min=1, max=MAX_COUNT, step=1, slider="log"),
            Control("step", "select", "3", options=tuple(str(s) for s in RING_STEPS)),
        ),
        render=render_ring,
        tables=("ring-steps", "ring-bytes"),
        values=("steps", "buffer-bytes", "max-bytes-sent", "sent-over-buffer", "bus-factor"),
    ),
}
