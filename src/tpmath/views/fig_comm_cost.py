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
from .draw import NUM_CHAR, PAD, label, pair, rect, text, wrapped

BAR_W = 250.0            # the longest bar (the slower of the two steps)
BAR_H = 20.0


def _ms(seconds: float) -> str:
    """As the ``comm-time`` table writes a time."""
    return fmt.num(seconds * 1e3, 3) + " ms"


def _labelled(x: float, y: float, w: float, cls: str, s: str, part: str, bar_w: float,
              outside: str = "below") -> list[dict]:
    """A segment with its time inside, or (``outside``) below it or right of it when it does not fit."""
    nodes = [rect(x, y, w, BAR_H, {"class": cls}, **{"data-key": part})]
    if NUM_CHAR * len(s) + 6 <= w:
        nodes.append(text(x + w / 2, y + BAR_H / 2 + 4, s, "num", "middle"))
    elif outside == "below":     # under the segment, from its left end unless that runs past the bar
        if x + NUM_CHAR * len(s) <= PAD + bar_w:
            nodes.append(text(x, y + BAR_H + 13, s, "num"))
        else:
            nodes.append(text(x + w, y + BAR_H + 13, s, "num", "end"))
    else:
        nodes.append(text(x + w + 6, y + BAR_H / 2 + 4, s, "num"))
    return nodes


def _layer(r: CommCost, layers: int, y: float, width: float) -> tuple[list[dict], float]:
    """One layer at the step's length: compute, then the four AllReduces (their share of T_comm).
    Its captions wrap to the drawing's width (``width`` + 90); returns the nodes and their height."""
    total = r.t_calc_s + r.t_comm_s
    unit = width / total if total else 0.0
    calc = r.t_calc_s * unit
    cap, lines = wrapped(PAD, y + 12, [label("fig.cc_layer_1", layers=fmt.integer(layers)), label("fig.cc_layer_2")],
                         width + 90, "cap")
    y += (lines - 1) * 15
    nodes = [cap, rect(PAD, y + 18, calc, BAR_H, {"class": "seg-calc"}, **{"data-key": "layer.calc"})]
    x = PAD + calc
    for i, row in enumerate(r.per_layer):
        # each collective's share of the communication time is its share of the bytes
        each = r.t_comm_s * row.bytes_per_rank / r.per_layer_bytes * unit if r.per_layer_bytes else 0.0
        nodes.append(rect(x, y + 18, each, BAR_H, {"class": "seg-comm"}, **{"data-key": f"layer.comm.{i}"}))
        if each >= 12:
            nodes.append(text(x + each / 2, y + 18 + BAR_H / 2 + 4, row.operator, "seg-t", "middle"))
        x += each
    sent, more = wrapped(PAD, y + 18 + BAR_H + 15, [label("fig.cc_layer_bytes_1", bytes=fmt.nbytes(r.per_layer_bytes)),
                                                  label("fig.cc_layer_bytes_2")], width + 90, "dimtext")
    nodes.append(sent)
    return nodes, (lines - 1 + more - 1) * 15


def figure_comm_cost(r: CommCost, layers: int) -> dict:
    """The ``comm-cost`` figure of one :func:`tpmath.comm_cost.comm_cost` result (with both times):
    bars at most :data:`BAR_W` long, shorter in a phone drawing."""
    title = label("fig.cc_title", layers=fmt.integer(layers))
    return pair("comm-cost", title, lambda max_w: _bars(r, layers, min(BAR_W, max_w - PAD * 2 - 90)))


def _bars(r: CommCost, layers: int, bar_w: float) -> tuple[list[dict], float, float]:
    calc, comm = r.t_calc_s, r.t_comm_s
    unit = bar_w / (calc + comm)                       # the serial step is the longest bar
    nodes = [rect(PAD, PAD, 14, 12, {"class": "seg-calc"}), text(PAD + 20, PAD + 10, label("fig.cc_calc"), "dimtext"),
             rect(PAD + 130, PAD, 14, 12, {"class": "seg-comm"}), text(PAD + 150, PAD + 10, label("fig.cc_comm"), "dimtext")]
    y = PAD + 26
    layer, extra = _layer(r, layers, y, bar_w)
    nodes += layer
    y += 18 + BAR_H + 30 + extra
    # No overlap: communication after compute.
    nodes.append(text(PAD, y + 12, label("fig.cc_serial"), "cap"))
    by = y + 18
    nodes += _labelled(PAD, by, calc * unit, "seg-calc", _ms(calc), "serial.calc", bar_w)
    nodes += _labelled(PAD + calc * unit, by, comm * unit, "seg-comm", _ms(comm), "serial.comm", bar_w)
    nodes.append(text(PAD + (calc + comm) * unit + 6, by + BAR_H / 2 + 4, _ms(r.t_serial_s), "num em"))
    nodes.append(text(PAD, by + BAR_H + 30, label("fig.cc_fraction", share=fmt.num(100 * r.comm_fraction_serial, 1) + " %"),
                      "dimtext"))
    y = by + BAR_H + 44
    # Perfect overlap: both start together; the step ends with the slower one.
    nodes.append(text(PAD, y + 12, label("fig.cc_overlap"), "cap"))
    by = y + 18
    nodes += _labelled(PAD, by, calc * unit, "seg-calc", _ms(calc), "overlap.calc", bar_w, "right")
    nodes += _labelled(PAD, by + BAR_H + 4, comm * unit, "seg-comm", _ms(comm), "overlap.comm", bar_w, "right")
    nodes.append(text(PAD, by + 2 * BAR_H + 20, label("fig.cc_overlap_total", total=_ms(r.t_overlap_s)), "dimtext"))
    y = by + 2 * BAR_H + 26
    return nodes, PAD * 2 + bar_w + 90, y + PAD
