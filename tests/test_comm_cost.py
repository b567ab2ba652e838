"""Communication cost of a Megatron TP layer: hand-computed bytes, the ring simulation, FLOPs, time model, CLI.

Independent references: numbers worked out by hand in the comments; the step-by-step
ring schedule of ``schedules`` (a different code path: it counts chunk transfers);
a FLOP count enumerated matmul by matmul (2·m·k·n each) in this file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tpmath import TPMathError
from tpmath.i18n import text
from tpmath.comm_cost import PRESETS, comm_cost, comm_cost_preset
from tpmath.schedules import ring_all_reduce

SRC = str(Path(__file__).resolve().parents[1] / "src")


def test_small_example_by_hand():
    # B=2, L=4, H=8, K=2: S = 2·4·8·2 = 128 bytes; tp=2 ring AllReduce sends 2·1/2·128 = 128 per rank
    res = comm_cost(2, 4, 8, 2, dtype_bytes=2, layers=3)
    assert res["algorithm"] == "ring"
    assert [r["collective"] for r in res["per_layer"]] == ["all-reduce"] * 4
    assert [r["phase"] for r in res["per_layer"]] == ["forward", "forward", "backward", "backward"]
    assert [r["operator"] for r in res["per_layer"]] == ["g", "g", "f", "f"]
    assert all(r["elements"] == 64 and r["bytes_per_rank"] == 128 for r in res["per_layer"])
    assert res["per_layer_bytes"] == 512 and res["per_step_bytes"] == 1536


def test_gpt2_xl_tp8_by_hand():
    # S = 1·1024·1600·2 = 3 276 800 B; 2·7/8·S = 5 734 400 B per AllReduce; ×4 = 22 937 600
    res = comm_cost(1, 1024, 1600, 8, 2, 48)
    assert res["per_layer"][0]["bytes_per_rank"] == 5_734_400
    assert res["per_layer_bytes"] == 22_937_600
    assert res["per_step_bytes"] == 22_937_600 * 48
    assert res["per_layer"][0]["bus_factor"] == 1.75


@pytest.mark.parametrize("tp", [1, 2, 3, 4, 6, 8])
def test_matches_ring_simulation(tp):
    B, L, H, K = 3, 5, 24, 2
    res = comm_cost(B, L, H, tp, K)
    sched = ring_all_reduce(tp, B * L * H, K)
    busiest = max(r["bytes_sent"] for r in sched["per_rank"])
    assert all(r["bytes_per_rank"] == busiest for r in res["per_layer"])
    assert res["per_layer_bytes"] == pytest.approx(4 * 2 * (tp - 1) / tp * B * L * H * K)


def test_tp1_needs_no_communication():
    res = comm_cost(4, 128, 256, 1)
    assert res["per_layer_bytes"] == 0 and res["per_step_bytes"] == 0


def test_sequence_parallel_same_bytes():
    res = comm_cost(2, 8, 16, 4, 2, 2)
    sp = res["sequence_parallel"]
    assert sp["available"]
    assert [r["collective"] for r in sp["per_layer"]].count("all-gather") == 4
    assert [r["collective"] for r in sp["per_layer"]].count("reduce-scatter") == 4
    # (n−1)/n · S per AG or RS: 3/4 · 2·8·16·2 = 384; 8 of them = 3072 = the four AllReduces
    assert all(r["bytes_per_rank"] == 384 for r in sp["per_layer"])
    assert sp["per_layer_bytes"] == res["per_layer_bytes"] == 3072
    assert sp["recompute_all_gather_bytes_per_layer"] == 768
    assert not comm_cost(1, 6, 16, 4)["sequence_parallel"]["available"]


def enumerated_forward_flops(B, L, H, heads):
    """2·m·k·n for every matmul of a GPT layer (MHA, MLP width 4H)."""
    d = H // heads
    mm = lambda m, k, n: 2 * m * k * n  # noqa: E731
    flops = mm(B * L, H, 3 * H)                       # QKV projection
    flops += B * heads * mm(L, d, L)                  # scores Q Kᵀ per head
    flops += B * heads * mm(L, L, d)                  # attention weights · V
    flops += mm(B * L, H, H)                          # output projection
    flops += mm(B * L, H, 4 * H) + mm(B * L, 4 * H, H)  # MLP up, down
    return flops


@pytest.mark.parametrize("B, L, H, heads", [(1, 1024, 1600, 25), (2, 8, 16, 4), (4, 2048, 12288, 96)])
def test_flop_formula_equals_enumeration(B, L, H, heads):
    res = comm_cost(B, L, H, 1)
    assert res["flops_per_layer_forward"] == enumerated_forward_flops(B, L, H, heads)


def test_time_model_by_hand():
    # GPT-2 XL layer, B=1, tp=8, 48 layers, 2400 Gbit/s = 3e11 B/s, 150 TFLOP/s
    res = comm_cost(1, 1024, 1600, 8, 2, 48, link_gbps=2400, tflops=150)
    t_comm = 22_937_600 * 48 / 3e11
    flops = 3 * 48 * 69_625_446_400 / 8          # 24·1024·1600² + 4·1024²·1600 = 69 625 446 400
    t_calc = flops / 150e12
    assert res["t_comm_s"] == pytest.approx(t_comm, rel=1e-12)
    assert res["t_calc_s"] == pytest.approx(t_calc, rel=1e-12)
    assert res["t_overlap_s"] == pytest.approx(max(t_comm, t_calc), rel=1e-12)
    assert res["t_serial_s"] == pytest.approx(t_comm + t_calc, rel=1e-12)
    only_link = comm_cost(1, 1024, 1600, 8, 2, 48, link_gbps=2400)
    assert "t_comm_s" in only_link and "t_calc_s" not in only_link and "t_overlap_s" not in only_link


def test_conventions_bilingual():
    res = comm_cost(1, 8, 8, 2)
    en, zh = text(res["convention"], "en"), text(res["convention"], "zh")
    assert "ring" in en.lower() and "2(n−1)/n" in en and "Ring" in zh and "发送" in zh


def test_presets_cited_values():
    assert PRESETS["gpt2-xl"] == {**PRESETS["gpt2-xl"], "hidden": 1600, "layers": 48, "seq": 1024}
    assert (PRESETS["gpt-3-175b"]["hidden"], PRESETS["gpt-3-175b"]["layers"], PRESETS["gpt-3-175b"]["seq"]) \
        == (12288, 96, 2048)
    assert (PRESETS["llama-2-7b"]["hidden"], PRESETS["llama-2-7b"]["layers"]) == (4096, 32)
    assert (PRESETS["llama-2-70b"]["hidden"], PRESETS["llama-2-70b"]["layers"]) == (8192, 80)
    res = comm_cost_preset("gpt-3-175b", batch=1, tp=8)
    # S = 2048·12288·2 = 50 331 648; 4 · 1.75 · S = 352 321 536 per layer
    assert res["per_layer_bytes"] == 352_321_536 and res["per_step_bytes"] == 352_321_536 * 96


@pytest.mark.parametrize("kwargs, field, match", [
    (dict(tp=3), "tp", "tp=3 does not divide hidden=16"),
    (dict(batch=0), "batch", "Batch size must be between 1 and 1\u202f000\u202f000, not 0"),
    (dict(dtype_bytes=16), "dtype_bytes", "Bytes per element must be between 1 and 8, not 16"),
    (dict(link_gbps=0), "link_gbps", "Link bandwidth must be at least 1e−9, not 0"),
    (dict(tflops="fast"), "tflops", "must be a number, not fast"),
    (dict(seq=2.5), "seq", "2.5"),
])
def test_validation(kwargs, field, match):
    args = dict(batch=1, seq=8, hidden=16, tp=2)
    args.update(kwargs)
    with pytest.raises(TPMathError, match=match) as info:
        comm_cost(**args)
    assert info.value.field == field


def cli(*args):
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "tpmath", *args], capture_output=True, text=True,
                          timeout=120, env=env)


def test_cli_comm_cost():
    out = cli("comm-cost", "--batch", "2", "--seq", "4", "--hidden", "8", "--tp", "2", "--layers", "3", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert {"inputs", "algorithm", "per_layer", "per_layer_bytes", "per_step_bytes",
            "convention"} <= set(data) and "2(n−1)/n" in data["convention"]
    assert {"phase", "where", "collective", "elements", "bus_factor", "bytes_per_rank"} <= set(data["per_layer"][0])
    assert data["per_step_bytes"] == 1536
    out = cli("comm-cost", "--preset", "gpt2-xl", "--tp", "8", "--link-gbps", "2400", "--tflops", "150", "--json")
    data = json.loads(out.stdout)
    assert data["per_layer_bytes"] == 22_937_600 and data["inputs"]["layers"] == 48 and "t_serial_s" in data


@pytest.mark.parametrize("args, word", [
    (("comm-cost", "--seq", "4", "--hidden", "7", "--tp", "2"), "hidden=7"),
    (("comm-cost", "--hidden", "8", "--tp", "2"), "--seq"),
    (("comm-cost", "--preset", "gpt-5", "--tp", "2"), "gpt-5"),
    (("comm-cost", "--seq", "4", "--hidden", "8", "--tp", "-1"), "tp must be between 1 and 4\u202f096, not -1"),
])
def test_cli_errors(args, word):
    out = cli(*args)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and word in lines[0], out.stderr
