"""Figure of page 2's cost calculator (section ``comm-cost``): compute vs communication time.

One layer first — its compute and its four AllReduces (g, g forward; f, f backward) with the
bytes one rank sends — then one micro-batch through all layers (× layers; an optimizer step
repeats it for each of its micro-batches) twice: without overlap, communication follows compute
(T_calc + T_comm); with perfect overlap, it runs beside compute and the micro-batch takes
max(T_calc, T_comm).  All bars of one figure share one time scale except the layer's, which is
the whole model's divided by the number of layers and drawn as long as it.
"""

from __future__ import annotations

from .. import fmt
from ..comm_cost import CommCost
from .draw import PAD, Seg, bar, column, figure_at, key, label, words

BAR_W = 250.0            # the longest bar (the slower of the two steps)
ROOM = 90.0              # right of the longest bar: the step's total time


def _ms(seconds: float) -> str:
    """As the ``comm-time`` table writes a time."""
    return fmt.num(seconds * 1e3, 3) + " ms"


def _layer(r: CommCost, layers: int, bar_w: float):
    """One layer at the step's length: compute, then the four AllReduces (their share of T_comm),
    its captions wrapped to the drawing's width."""
    total = r.t_calc_s + r.t_comm_s
    unit = bar_w / total if total else 0.0
    segs = [Seg(r.t_calc_s * unit, "seg-calc", "layer.calc")]
    for i, row in enumerate(r.per_layer):
        # each collective's share of the communication time is its share of the bytes
        each = r.t_comm_s * row.bytes_per_rank / r.per_layer_bytes * unit if r.per_layer_bytes else 0.0
        segs.append(Seg(each, "seg-comm", f"layer.comm.{i}", row.operator, "seg-t"))
    room = bar_w + ROOM
    return column([words([label("fig.cc_layer_1", layers=fmt.integer(layers)), label("fig.cc_layer_2")], room, "cap"),
                   bar(segs, outside=None),
                   words([label("fig.cc_layer_bytes_1", bytes=fmt.nbytes(r.per_layer_bytes)),
                          label("fig.cc_layer_bytes_2")], room)])


def figure_comm_cost(r: CommCost, layers: int) -> dict:
    """The ``comm-cost`` figure of one :func:`tpmath.comm_cost.comm_cost` result (with both times):
    bars at most :data:`BAR_W` long, shorter in a phone drawing."""
    title = label("fig.cc_title", layers=fmt.integer(layers))
    return figure_at("comm-cost", title, lambda max_w: _bars(r, layers, min(BAR_W, max_w - PAD * 2 - ROOM)))


def _bars(r: CommCost, layers: int, bar_w: float) -> list:
    calc, comm = r.t_calc_s, r.t_comm_s
    unit = bar_w / (calc + comm)                       # the serial step is the longest bar
    room = bar_w + ROOM
    # No overlap: communication after compute.
    serial = column([words(label("fig.cc_serial"), room, "cap"),
                     bar([Seg(calc * unit, "seg-calc", "serial.calc", _ms(calc)),
                          Seg(comm * unit, "seg-comm", "serial.comm", _ms(comm))],
                         end=(_ms(r.t_serial_s), "num em"), bar_w=bar_w),
                     words(label("fig.cc_fraction", share=fmt.num(100 * r.comm_fraction_serial, 1) + " %"), room)])
    # Perfect overlap: both start together; the step ends with the slower one.
    overlap = column([words(label("fig.cc_overlap"), room, "cap"),
                      bar([Seg(calc * unit, "seg-calc", "overlap.calc", _ms(calc))], "right"),
                      bar([Seg(comm * unit, "seg-comm", "overlap.comm", _ms(comm))], "right"),
                      words(label("fig.cc_overlap_total", total=_ms(r.t_overlap_s)), room)])
    return [[key("seg-calc", label("fig.cc_calc")), key("seg-comm", label("fig.cc_comm"))],
            [_layer(r, layers, bar_w)], [serial], [overlap]]
