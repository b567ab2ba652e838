"""View of page 2's communication-cost calculator (section ``comm-cost``).

Letters (as in :mod:`tpmath.comm_cost`):
    B batch (sequences per micro-batch)   L sequence length    h hidden size
    n tp (ranks)                          k bytes per element  N layers     a attention heads

Tables: ``comm-layer`` (each TP collective of one layer: phase, where, collective with
its Megatron operator, elements, ring factor, bytes one rank sends per AllReduce; foot: the
forward and backward subtotals, per layer, all N layers of one micro-batch) and
``comm-time`` (compute vs communication, overlapped ``max`` vs serial sum).  The counting
convention is the core's own sentence, in the page's language.

With a preset, hidden / seq / layers / heads are the preset's (shown, not editable); tp must
divide its heads (the core's check, a message naming the head count).  "Custom" frees the
fields, heads included: tp must divide the heads, and the heads the hidden size.
"""

from __future__ import annotations

from typing import Any

from .. import comm_cost as cc
from ..collectives import REGISTRY
from ..errors import TPMathError
from . import Control, Section, parse_controls
from .cells import label
from .. import fmt
from .fig_comm_cost import figure_comm_cost

CUSTOM = "custom"
PRESET_CHOICES = tuple(cc.PRESETS) + (CUSTOM,)
DEFAULT_PRESET = "llama-2-7b"
# Four sequences of Llama-2-7B's 4096 tokens: S = 4·4096·4096 = 67 108 864 elements, the same as the
# page's interview question 4 (B = 8, L = 2048), so its 224 / 448 / 448 / 896 MiB are the default rows.
DEFAULT_BATCH = 4
DTYPE_BYTES = (1, 2, 4)
PRESET_FIELDS = ("hidden", "seq", "layers", "heads")   # what a preset sets (its fields are disabled)
LINK_CHOICES = tuple(cc.HARDWARE) + (CUSTOM,)           # a link preset sets link_gbps (disabled)
DEFAULT_LINK = CUSTOM       # the bandwidth field stays the reader's (3600 Gb/s = H100) unless a link is chosen


def cost_controls(values: dict) -> dict:
    """Validated controls; with a preset, hidden / seq / layers come from the preset."""
    link = next(ctl for ctl in SECTIONS["comm-cost"].controls if ctl.name == "link").parse(values.get("link", DEFAULT_LINK))
    if link != CUSTOM:      # the link sets the bandwidth: what the field held is unused
        values = {**values, "link_gbps": cc.link_gbps(link)}
    c = parse_controls(SECTIONS["comm-cost"].controls, values)
    preset = c["preset"]
    if preset != CUSTOM:
        p = cc.PRESETS[preset]
        c.update({k: p[k] for k in PRESET_FIELDS})
        c["kv_heads"], model = p["kv_heads"], p["label"]
    else:
        c["kv_heads"], model = c["heads"], None       # the page's custom heads are multi-head
    # Megatron's rules (tp | heads, the head size whole, tp | hidden), before anything is computed
    cc.check_heads(c["tp"], c["heads"], c["kv_heads"], c["hidden"], model)
    if c["hidden"] % c["tp"]:
        raise TPMathError("not_divides", "tp", tp_name="tp", tp=c["tp"], size_name="hidden", size=c["hidden"])
    return c


def preset_options(tp: int) -> dict:
    """{preset: why} of the presets Megatron cannot split over ``tp`` ranks (GPT-2 XL's 25 heads at
    tp = 8): offered disabled with the reason, rather than accepted and then refused."""
    off = {}
    for name, p in cc.PRESETS.items():
        if p["heads"] % tp:
            off[name] = label("note.preset_heads_tp", heads=fmt.integer(p["heads"]), tp=fmt.integer(tp))
        elif p["kv_heads"] % tp and tp % p["kv_heads"]:
            off[name] = label("note.preset_kv_heads_tp", kv_heads=fmt.integer(p["kv_heads"]), tp=fmt.integer(tp))
    return off


def run(c: dict) -> dict:
    """The core's ``comm_cost`` for validated controls."""
    return cc.comm_cost(c["batch"], c["seq"], c["hidden"], c["tp"], c["dtype_bytes"], c["layers"],
                        link_gbps=c["link_gbps"], tflops=c["tflops"], heads=c["heads"], kv_heads=c["kv_heads"])


def _count(r: cc.CommCost, phase: str) -> int:
    """How many collectives of one layer run in ``phase``."""
    return sum(1 for row in r.per_layer if row.phase == phase)


def _ms(seconds: float) -> str:
    return fmt.num(seconds * 1e3, 3) + " ms"


def render_cost(values: dict, lang: str) -> dict:
    """Per-rank bytes of each TP collective of one layer and per step; compute vs communication."""
    c = cost_controls(values)
    r = run(c)
    rows = []
    for row in r.per_layer:
        rows.append([label(f"label.row_phase_{row.phase}"), row.where,
                     f"{REGISTRY[row.collective].nccl} ({row.operator})", fmt.integer(row.elements),
                     fmt.num(row.bus_factor), fmt.nbytes(row.bytes_per_rank)])
    layer = {
        "caption": "cap.row_comm_layer",
        "columns": ["col.row_phase", "col.row_where", "col.row_collective_op", "col.row_elements",
                    "col.row_ring_factor", "col.row_bytes_per_rank"],
        "rows": rows,
        "foot": [
            [label("label.row_pass_forward", count=fmt.integer(_count(r, "forward"))), "", "", "", "",
             fmt.nbytes(r.per_layer_forward_bytes)],
            [label("label.row_pass_backward", count=fmt.integer(_count(r, "backward"))), "", "", "", "",
             fmt.nbytes(r.per_layer_backward_bytes)],
            [label("label.row_per_layer"), "", "", "", "", fmt.nbytes(r.per_layer_bytes)],
            [label("label.row_per_step", layers=fmt.integer(c["layers"])),
             "", "", "", "", fmt.nbytes(r.per_step_bytes)],
        ],
    }
    time = {
        "caption": "cap.row_comm_time",
        "columns": ["col.row_quantity", "col.row_time"],
        "rows": [
            [label("label.row_t_calc"), _ms(r.t_calc_s)],
            [label("label.row_t_comm"), _ms(r.t_comm_s)],
            [label("label.row_t_overlap"), _ms(r.t_overlap_s)],
            [label("label.row_t_serial"), _ms(r.t_serial_s)],
        ],
    }
    notes = {"comm-convention": r.convention}
    state = {"preset": {"disabled": False, "options": preset_options(c["tp"])}}
    if c["preset"] != CUSTOM:
        notes["comm-preset"] = label("note.row_preset", name=cc.PRESETS[c["preset"]]["label"],
                                     hidden=fmt.integer(c["hidden"]), seq=fmt.integer(c["seq"]),
                                     layers=fmt.integer(c["layers"]), heads=fmt.integer(c["heads"]),
                                     kv_heads=fmt.integer(c["kv_heads"]))
        # The preset's fields show its values and are not editable ("Custom" frees them).
        why = label("note.row_set_by_preset", name=cc.PRESETS[c["preset"]]["label"])
        state.update({k: {"disabled": True, "value": str(c[k]), "why": why} for k in PRESET_FIELDS})
    if c["link"] != CUSTOM:
        hw = cc.HARDWARE[c["link"]]
        state["link_gbps"] = {"disabled": True, "value": f"{c['link_gbps']:g}",   # as the input holds it
                              "why": label("note.row_set_by_link", name=hw["label"])}
        notes["comm-link"] = label(f"note.row_link_{hw['kind']}", name=hw["label"],
                                   total=fmt.integer(hw["total_gb_s"]), per=fmt.integer(hw["per_direction_gb_s"]),
                                   gbps=fmt.num(c["link_gbps"]))
    return {
        "control_state": state,
        "controls": c,
        "tables": {"comm-layer": layer, "comm-time": time},
        "values": {
            "cost-activation": fmt.nbytes(r.activation_bytes),
            "cost-layer-bytes": fmt.nbytes(r.per_layer_bytes),
            "cost-step-bytes": fmt.nbytes(r.per_step_bytes),
            "cost-comm-fraction": fmt.num(100 * r.comm_fraction_serial, 1) + " %",
        },
        "notes": notes,
        "figures": {"comm-cost": figure_comm_cost(r, c["layers"])},
    }


def _defaults() -> dict[str, Any]:
    p = cc.PRESETS[DEFAULT_PRESET]
    return {k: p[k] for k in PRESET_FIELDS}


_D = _defaults()

SECTIONS = {
    "comm-cost": Section("comm-cost", (
        Control("preset", "select", DEFAULT_PRESET, options=PRESET_CHOICES, label="ctl.row_preset"),
        Control("batch", "number", DEFAULT_BATCH, min=1, max=4096, step=1, label="ctl.row_batch", slider="log"),
        Control("seq", "number", _D["seq"], min=1, max=10**6, step=1, label="ctl.row_seq", slider="log"),
        Control("hidden", "number", _D["hidden"], min=1, max=10**6, step=1, label="ctl.row_hidden", slider="log"),
        Control("heads", "number", _D["heads"], min=1, max=10**6, step=1, label="ctl.row_heads"),
        Control("tp", "number", 8, min=1, max=512, step=1, label="ctl.row_tp", slider="log"),
        Control("dtype_bytes", "select", 2, options=DTYPE_BYTES, label="ctl.row_dtype_bytes"),
        Control("layers", "number", _D["layers"], min=1, max=1000, step=1, label="ctl.row_layers", slider="log"),
        Control("link", "select", DEFAULT_LINK, options=LINK_CHOICES, label="ctl.row_link"),
        # Upper bounds keep the time model defined (at 1e308 both times round to 0 s: 0 / 0).
        Control("link_gbps", "number", 3600, min=0.001, max=cc.LINK_GBPS_MAX, step="any", label="ctl.row_link_gbps"),
        Control("tflops", "number", 400, min=0.001, max=cc.TFLOPS_MAX, step="any", label="ctl.row_tflops"),
    ), render_cost, tables=("comm-layer", "comm-time"),
        values=("cost-activation", "cost-layer-bytes", "cost-step-bytes", "cost-comm-fraction")),
}
