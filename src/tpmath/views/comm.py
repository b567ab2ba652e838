"""View of page 2's communication-cost calculator (section ``comm-cost``).

Letters (as in :mod:`tpmath.comm_cost`):
    B batch (sequences per micro-batch)   L sequence length    H hidden size
    n tp (ranks)                          K bytes per element  N layers

Tables: ``comm-layer`` (each TP collective of one layer: phase, where, collective with
its Megatron operator, elements, ring factor, bytes one rank sends; foot: per layer, per step) and
``comm-time`` (compute vs communication, overlapped ``max`` vs serial sum).  The counting
convention is the core's own sentence, in the page's language.
"""

from __future__ import annotations

from typing import Any

from .. import comm_cost as cc
from ..errors import TPMathError
from ..validate import as_choice, as_float, as_int
from . import Control, Section
from . import fmt
from .fig_comm import figure_comm_cost

CUSTOM = "custom"
PRESET_CHOICES = tuple(cc.PRESETS) + (CUSTOM,)
DEFAULT_PRESET = "llama-2-7b"
DTYPE_BYTES = (1, 2, 4)
NCCL_NAME = {"all-reduce": "AllReduce", "all-gather": "AllGather", "reduce-scatter": "ReduceScatter"}


def cost_controls(values: dict) -> dict:
    """Validated controls; with a preset, hidden / seq / layers come from the preset."""
    preset = as_choice("preset", str(values["preset"]), PRESET_CHOICES)
    c = {
        "preset": preset,
        "batch": as_int("batch", values["batch"], 1, 4096),
        "seq": as_int("seq", values["seq"], 1, 10**6),
        "hidden": as_int("hidden", values["hidden"], 1, 10**6),
        "tp": as_int("tp", values["tp"], 1, 512),
        "dtype_bytes": as_int("dtype_bytes", values["dtype_bytes"], 1, 8),
        "layers": as_int("layers", values["layers"], 1, 1000),
        "link_gbps": as_float("link_gbps", values["link_gbps"], 1e-3, 1e7),
        "tflops": as_float("tflops", values["tflops"], 1e-3, 1e6),
    }
    if c["dtype_bytes"] not in DTYPE_BYTES:
        raise TPMathError(f"dtype_bytes={c['dtype_bytes']} is not one of 1, 2, 4",
                          f"dtype_bytes={c['dtype_bytes']} 不在可选值 1、2、4 中", field="dtype_bytes")
    if preset != CUSTOM:
        p = cc.PRESETS[preset]
        c.update(hidden=p["hidden"], seq=p["seq"], layers=p["layers"])
    if c["hidden"] % c["tp"]:
        raise TPMathError(
            f"tp={c['tp']} does not divide hidden={c['hidden']}: Megatron splits heads and the MLP into tp equal shards",
            f"tp={c['tp']} 不能整除 hidden={c['hidden']}：Megatron 要把注意力头和 MLP 平均切成 tp 份", field="tp")
    return c


def run(c: dict) -> dict:
    """The core's ``comm_cost`` for validated controls."""
    return cc.comm_cost(c["batch"], c["seq"], c["hidden"], c["tp"], c["dtype_bytes"], c["layers"],
                        link_gbps=c["link_gbps"], tflops=c["tflops"])


def _ms(seconds: float) -> str:
    return fmt.num(seconds * 1e3, 3) + " ms"


def render_cost(values: dict, lang: str) -> dict:
    """Per-rank bytes of each TP collective of one layer and per step; compute vs communication."""
    c = cost_controls(values)
    r = run(c)
    rows = []
    for row in r["per_layer"]:
        where = row["where_zh"] if lang == "zh" and row.get("where_zh") else row["where"]
        rows.append([{"key": f"label.row_phase_{row['phase']}"}, where,
                     f"{NCCL_NAME[row['collective']]} ({row['operator']})", fmt.integer(row["elements"]),
                     fmt.num(row["bus_factor"]), fmt.nbytes(row["bytes_per_rank"])])
    layer = {
        "caption": "cap.row_comm_layer",
        "columns": ["col.row_phase", "col.row_where", "col.row_collective_op", "col.row_elements",
                    "col.row_ring_factor", "col.row_bytes_per_rank"],
        "rows": rows,
        "foot": [
            [{"key": "label.row_per_layer"}, "", "", "", "", fmt.nbytes(r["per_layer_bytes"])],
            [{"key": "label.row_per_step", "args": {"layers": fmt.integer(c["layers"])}},
             "", "", "", "", fmt.nbytes(r["per_step_bytes"])],
        ],
    }
    time = {
        "caption": "cap.row_comm_time",
        "columns": ["col.row_quantity", "col.row_time"],
        "rows": [
            [{"key": "label.row_t_calc"}, _ms(r["t_calc_s"])],
            [{"key": "label.row_t_comm"}, _ms(r["t_comm_s"])],
            [{"key": "label.row_t_overlap"}, _ms(r["t_overlap_s"])],
            [{"key": "label.row_t_serial"}, _ms(r["t_serial_s"])],
        ],
    }
    notes = {"comm-convention": r["convention_zh"] if lang == "zh" else r["convention_en"]}
    if c["preset"] != CUSTOM:
        notes["comm-preset"] = {"key": "note.row_preset", "args": {
            "name": cc.PRESETS[c["preset"]]["label"], "hidden": fmt.integer(c["hidden"]),
            "seq": fmt.integer(c["seq"]), "layers": fmt.integer(c["layers"])}}
    return {
        "controls": c,
        "tables": {"comm-layer": layer, "comm-time": time},
        "values": {
            "cost-activation": fmt.nbytes(r["activation_bytes"]),
            "cost-layer-bytes": fmt.nbytes(r["per_layer_bytes"]),
            "cost-step-bytes": fmt.nbytes(r["per_step_bytes"]),
            "cost-comm-fraction": fmt.num(100 * r["comm_fraction_serial"], 1) + " %",
        },
        "notes": notes,
        "figures": {"comm-cost": figure_comm_cost(r, c["layers"])},
    }


def _defaults() -> dict[str, Any]:
    p = cc.PRESETS[DEFAULT_PRESET]
    return {"hidden": p["hidden"], "seq": p["seq"], "layers": p["layers"]}


_D = _defaults()

SECTIONS = {
    "comm-cost": Section("comm-cost", (
        Control("preset", "select", DEFAULT_PRESET, options=PRESET_CHOICES, label="ctl.row_preset"),
        Control("batch", "number", 1, min=1, max=4096, step=1, label="ctl.row_batch"),
        Control("seq", "number", _D["seq"], min=1, max=10**6, step=1, label="ctl.row_seq"),
        Control("hidden", "number", _D["hidden"], min=1, max=10**6, step=1, label="ctl.row_hidden"),
        Control("tp", "number", 8, min=1, max=512, step=1, label="ctl.row_tp"),
        Control("dtype_bytes", "select", 2, options=DTYPE_BYTES, label="ctl.row_dtype_bytes"),
        Control("layers", "number", _D["layers"], min=1, max=1000, step=1, label="ctl.row_layers"),
        Control("link_gbps", "number", 3600, min=0.001, step="any", label="ctl.row_link_gbps"),
        Control("tflops", "number", 400, min=0.001, step="any", label="ctl.row_tflops"),
    ), render_cost, tables=("comm-layer", "comm-time"),
        values=("cost-activation", "cost-layer-bytes", "cost-step-bytes", "cost-comm-fraction")),
}
