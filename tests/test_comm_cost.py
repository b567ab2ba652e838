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
from tpmath.record import fields_of
from tpmath.schedules import ring_all_reduce

SRC = str(Path(__file__).resolve().parents[1] / "src")


def test_small_example_by_hand():
    # B=2, L=4, H=8, K=2: S = 2·4·8·2 = 128 bytes; tp=2 ring AllReduce sends 2·1/2·128 = 128 per rank
    res = comm_cost(2, 4, 8, 2, dtype_bytes=2, layers=3)
    assert res.algorithm == "ring"
    assert [r.collective for r in res.per_layer] == ["all-reduce"] * 4
    assert [r.phase for r in res.per_layer] == ["forward", "forward", "backward", "backward"]
    assert [r.operator for r in res.per_layer] == ["f̄", "f̄", "f", "f"]
    assert all(r.elements == 64 and r.bytes_per_rank == 128 for r in res.per_layer)
    assert res.per_layer_bytes == 512 and res.per_step_bytes == 1536


def test_h1600_tp8_by_hand():
    # No heads given: only tp | h is checked (GPT-2 XL's 25 heads would refuse tp 8, see below).
    # S = 1·1024·1600·2 = 3 276 800 B; 2·7/8·S = 5 734 400 B per AllReduce; ×4 = 22 937 600
    res = comm_cost(1, 1024, 1600, 8, 2, 48)
    assert res.per_layer[0].bytes_per_rank == 5_734_400
    assert res.per_layer_bytes == 22_937_600
    assert res.per_layer_forward_bytes == res.per_layer_backward_bytes == 2 * 5_734_400
    assert res.per_step_bytes == 22_937_600 * 48
    assert res.per_layer[0].bus_factor == 1.75


def test_interview_question_4_subtotals_by_hand():
    # B=8, L=2048, h=4096, bf16, tp=8: S·k = 8·2048·4096·2 B = 128 MiB; 2·7/8 of it = 224 MiB per AllReduce,
    # 2 forward = 448 MiB, 2 backward = 448 MiB, 896 MiB per layer.
    MiB = 2 ** 20
    res = comm_cost(8, 2048, 4096, 8, 2, 1, heads=32)
    assert res.activation_bytes == 128 * MiB
    assert [r.bytes_per_rank for r in res.per_layer] == [224 * MiB] * 4
    assert res.per_layer_forward_bytes == 448 * MiB and res.per_layer_backward_bytes == 448 * MiB
    assert res.per_layer_bytes == res.per_step_bytes == 896 * MiB


@pytest.mark.parametrize("tp", [1, 2, 3, 4, 6, 8])
def test_matches_ring_simulation(tp):
    B, L, H, K = 3, 5, 24, 2
    res = comm_cost(B, L, H, tp, K)
    sched = ring_all_reduce(tp, B * L * H, K)
    busiest = max(r.bytes_sent for r in sched.per_rank)
    assert all(r.bytes_per_rank == busiest for r in res.per_layer)
    assert res.per_layer_bytes == pytest.approx(4 * 2 * (tp - 1) / tp * B * L * H * K)


def test_tp1_needs_no_communication():
    res = comm_cost(4, 128, 256, 1)
    assert res.per_layer_bytes == 0 and res.per_step_bytes == 0


def test_sequence_parallel_megatron_sends_a_quarter_more():
    res = comm_cost(2, 8, 16, 4, 2, 2)
    sp = res.sequence_parallel
    assert sp.available
    # Megatron per layer (two blocks): g AG and ḡ RS forward; ḡ' AG, the re-gather of the
    # column-parallel input (AG) and g' RS backward -> 6 AllGathers, 4 ReduceScatters
    assert [r.collective for r in sp.per_layer].count("all-gather") == 6
    assert [r.collective for r in sp.per_layer].count("reduce-scatter") == 4
    # (n−1)/n · S per AG or RS: 3/4 · 2·8·16·2 = 384; 10 of them = 3840 = 1.25 × the four AllReduces
    assert all(r.bytes_per_rank == 384 for r in sp.per_layer)
    assert res.per_layer_bytes == 3072
    assert sp.per_layer_bytes == 3840 == 1.25 * res.per_layer_bytes
    assert sp.recompute_all_gather_bytes_per_layer == 768
    assert sp.per_layer_bytes_keeping_input == 3072 == res.per_layer_bytes
    assert sp.per_step_bytes == 2 * 3840
    assert not comm_cost(1, 6, 16, 4).sequence_parallel.available


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
    assert res.flops_per_layer_forward == enumerated_forward_flops(B, L, H, heads)


def test_time_model_by_hand():
    # GPT-2 XL layer, B=1, tp=8, 48 layers, 2400 Gbit/s = 3e11 B/s, 150 TFLOP/s
    res = comm_cost(1, 1024, 1600, 8, 2, 48, link_gbps=2400, tflops=150)
    t_comm = 22_937_600 * 48 / 3e11
    flops = 3 * 48 * 69_625_446_400 / 8          # 24·1024·1600² + 4·1024²·1600 = 69 625 446 400
    t_calc = flops / 150e12
    assert res.t_comm_s == pytest.approx(t_comm, rel=1e-12)
    assert res.t_calc_s == pytest.approx(t_calc, rel=1e-12)
    assert res.t_overlap_s == pytest.approx(max(t_comm, t_calc), rel=1e-12)
    assert res.t_serial_s == pytest.approx(t_comm + t_calc, rel=1e-12)
    only_link = comm_cost(1, 1024, 1600, 8, 2, 48, link_gbps=2400)
    keys = fields_of(only_link)          # the JSON's keys: no time that was not asked for
    assert "t_comm_s" in keys and "t_calc_s" not in keys and "t_overlap_s" not in keys


def test_conventions_bilingual():
    res = comm_cost(1, 8, 8, 2)
    en, zh = text(res.convention, "en"), text(res.convention, "zh")
    assert "ring" in en.lower() and "2(t−1)/t" in en and "Ring" in zh and "发送" in zh


# (hidden, layers, seq, attention heads, key/value heads) from the sources cited in comm_cost.PRESETS:
# GPT-2 XL config.json, Megatron-LM Table 1, Llama 2 config.json (7B, 70B), GPT-3 Table 2.1.
CITED = {"gpt2-xl": (1600, 48, 1024, 25, 25), "megatron-8.3b": (3072, 72, 1024, 32, 32),
         "llama-2-7b": (4096, 32, 4096, 32, 32), "llama-2-70b": (8192, 80, 4096, 64, 8),
         "gpt-3-175b": (12288, 96, 2048, 96, 96)}


@pytest.mark.parametrize("preset", sorted(CITED))
def test_presets_carry_the_cited_heads(preset):
    p = PRESETS[preset]
    assert (p["hidden"], p["layers"], p["seq"], p["heads"], p["kv_heads"]) == CITED[preset]


def megatron_accepts(tp, heads, kv_heads, hidden):
    """Megatron's TransformerConfig rules, written out: heads a multiple of tp, KV groups a multiple
    or a divisor of tp; and a whole head size."""
    return heads % tp == 0 and (kv_heads % tp == 0 or tp % kv_heads == 0) and hidden % heads == 0


@pytest.mark.parametrize("preset", sorted(CITED))
def test_preset_tp_must_divide_the_heads(preset):
    hidden, layers, seq, heads, kv = CITED[preset]
    accepted = []
    for tp in range(1, 129):
        if megatron_accepts(tp, heads, kv, hidden):
            res = comm_cost_preset(preset, batch=1, tp=tp)
            S = seq * hidden                                      # B = 1
            assert res.per_layer_bytes == pytest.approx(4 * 2 * (tp - 1) / tp * S * 2)
            accepted.append(tp)
            continue
        with pytest.raises(TPMathError) as info:
            comm_cost_preset(preset, batch=1, tp=tp)
        assert info.value.field == "tp"
        for lang in ("en", "zh"):
            msg = info.value.message(lang)
            assert f"tp={tp}" in msg and (str(heads) in msg if heads % tp else str(kv) in msg), msg
    assert 1 in accepted and max(accepted) <= heads


def test_gpt2_xl_at_tp8_names_its_25_heads():
    with pytest.raises(TPMathError) as info:
        comm_cost_preset("gpt2-xl", batch=1, tp=8)
    en, zh = info.value.message("en"), info.value.message("zh")
    assert "GPT-2 XL" in en and "25 attention heads" in en and "tp=8" in en and "1, 5, 25" in en
    assert "25 个注意力头" in zh and "tp=8" in zh
    # tp = 5 divides the 25 heads: S·k = 1024·1600·2 B, 2·4/5 of it per AllReduce
    res = comm_cost_preset("gpt2-xl", batch=1, tp=5)
    assert res.per_layer[0].bytes_per_rank == 2 * 4 * 1024 * 1600 * 2 // 5 == 5_242_880


@pytest.mark.parametrize("heads, kv, hidden, tp, field, code", [
    (6, None, 64, 2, "heads", "head_size_uneven"),          # head size 64/6 not whole
    (12, None, 48, 8, "tp", "tp_heads"),                    # 8 ∤ 12
    (24, 6, 48, 4, "tp", "tp_kv_heads"),                    # 6 KV heads: neither 4 | 6 nor 6 | 4
    (16, 3, 64, 4, "kv_heads", "kv_not_dividing_heads"),    # 3 ∤ 16
])
def test_custom_heads_checked_as_megatron_does(heads, kv, hidden, tp, field, code):
    with pytest.raises(TPMathError) as info:
        comm_cost(1, 8, hidden, tp, heads=heads, kv_heads=kv)
    assert (info.value.field, info.value.code) == (field, code)


@pytest.mark.parametrize("heads, kv, tp", [(16, 4, 16), (16, 4, 2), (64, 8, 16), (64, 8, 4), (32, 32, 8)])
def test_kv_heads_a_multiple_or_a_divisor_of_tp_pass(heads, kv, tp):
    assert megatron_accepts(tp, heads, kv, 4096)
    res = comm_cost(1, 8, 4096, tp, heads=heads, kv_heads=kv)
    assert res.inputs["heads"] == heads and res.inputs["kv_heads"] == kv


def test_presets_cited_values():
    assert (PRESETS["gpt-3-175b"]["hidden"], PRESETS["gpt-3-175b"]["layers"], PRESETS["gpt-3-175b"]["seq"]) \
        == (12288, 96, 2048)
    assert (PRESETS["llama-2-7b"]["hidden"], PRESETS["llama-2-7b"]["layers"]) == (4096, 32)
    assert (PRESETS["llama-2-70b"]["hidden"], PRESETS["llama-2-70b"]["layers"]) == (8192, 80)
    res = comm_cost_preset("gpt-3-175b", batch=1, tp=8)
    # S = 2048·12288·2 = 50 331 648; 4 · 1.75 · S = 352 321 536 per layer
    assert res.per_layer_bytes == 352_321_536 and res.per_step_bytes == 352_321_536 * 96


@pytest.mark.parametrize("kwargs, field, match", [
    (dict(tp=3), "tp", "tp=3 does not divide hidden=16"),
    (dict(batch=0), "batch", "Batch size must be between 1 and 1\u202f000\u202f000, not 0"),
    (dict(dtype_bytes=16), "dtype_bytes", "Bytes per element must be between 1 and 8, not 16"),
    (dict(link_gbps=0), "link_gbps", "Link bandwidth must be between 1e−9 and 10\u202f000\u202f000, not 0"),
    # beyond the bounds the times would overflow: 1e308 gave 0/0 (a traceback on the command line)
    (dict(link_gbps="1e308", tflops=1), "link_gbps", "Link bandwidth must be between 1e−9 and 10\u202f000\u202f000, not 1e308"),
    (dict(link_gbps=1, tflops="1e308"), "tflops", "between 1e−9 and 1\u202f000\u202f000, not 1e308"),
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
            "convention"} <= set(data) and "2(t−1)/t" in data["convention"]
    assert {"phase", "where", "collective", "elements", "bus_factor", "bytes_per_rank"} <= set(data["per_layer"][0])
    assert data["per_step_bytes"] == 1536
    out = cli("comm-cost", "--preset", "gpt2-xl", "--tp", "5", "--link-gbps", "2400", "--tflops", "150", "--json")
    data = json.loads(out.stdout)
    # S·k = 1024·1600·2 B; 4 AllReduces of 2·4/5 of it
    assert data["per_layer_bytes"] == 4 * 5_242_880 and data["inputs"]["layers"] == 48 and "t_serial_s" in data
    assert (data["inputs"]["heads"], data["inputs"]["kv_heads"]) == (25, 25)
    assert data["per_layer_forward_bytes"] == data["per_layer_backward_bytes"] == 2 * 5_242_880


@pytest.mark.parametrize("args, word", [
    (("comm-cost", "--seq", "4", "--hidden", "7", "--tp", "2"), "hidden=7"),
    (("comm-cost", "--hidden", "8", "--tp", "2"), "--seq"),
    (("comm-cost", "--preset", "gpt-5", "--tp", "2"), "gpt-5"),
    (("comm-cost", "--seq", "4", "--hidden", "8", "--tp", "-1"), "tp must be between 1 and 4\u202f096, not -1"),
    (("comm-cost", "--preset", "gpt2-xl", "--tp", "8"), "25 attention heads"),
    (("comm-cost", "--preset", "gpt2-xl", "--tp", "8", "--lang", "zh"), "25 个注意力头"),
    (("comm-cost", "--seq", "8", "--hidden", "48", "--heads", "12", "--tp", "8"), "the 12 attention heads"),
    (("comm-cost", "--seq", "8", "--hidden", "64", "--heads", "6", "--tp", "2"), "heads=6"),
])
def test_cli_errors(args, word):
    out = cli(*args)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and word in lines[0], out.stderr


# ------------------------------------------------------------------ hardware links
# The cited values (content/*/row-parallel.md, refs 5, 16-18): NVIDIA's NVLink figures count both
# directions together; one InfiniBand NDR port is 400 Gb/s each way.
CITED_TOTAL_GB_S = {"h100": 900, "a100": 600, "a800": 400, "h800": 400}


def test_hardware_presets_are_the_cited_values_per_direction():
    from tpmath.comm_cost import HARDWARE, link_gbps
    for name, total in CITED_TOTAL_GB_S.items():
        assert HARDWARE[name]["total_gb_s"] == total
        assert HARDWARE[name]["per_direction_gb_s"] == total / 2
        assert link_gbps(name) == total / 2 * 8            # Gb/s, as --link-gbps takes it
    assert link_gbps("ib-ndr") == 400 and HARDWARE["ib-ndr"]["per_direction_gb_s"] == 50
    assert link_gbps("h800") == link_gbps("a800") == 1600


def test_h800_link_time_is_bytes_over_200_gb_s():
    from tpmath.comm_cost import link_gbps
    r = comm_cost(4, 4096, 4096, 8, 2, 32, link_gbps=link_gbps("h800"), tflops=400)
    assert r.t_comm_s == pytest.approx(r.per_step_bytes / 200e9)
    # the page's τ_comm/τ_calc ≈ (n−1)kΦ/(9hβ): 0.76 on H800 NVLink, 0.34 on H100 (attention term ignored)
    approx = lambda beta: 7 * 2 * 400e12 / (9 * 4096 * beta)    # noqa: E731
    assert round(approx(200e9), 2) == 0.76 and round(approx(450e9), 2) == 0.34
    assert round(1.25 * approx(200e9), 2) == 0.95


@pytest.mark.parametrize("lang, row", [("en", "| 8 × H800 | 400 GB/s both ways = 200 GB/s |"),
                                       ("en", "| 8 × A800 | 400 GB/s both ways = 200 GB/s |"),
                                       ("zh", "| 8 × H800 | 双向合计 400 GB/s = 单向 200 GB/s |"),
                                       ("zh", "| 8 × A800 | 双向合计 400 GB/s = 单向 200 GB/s |")])
def test_nvlink_table_rows_state_the_per_direction_value(lang, row):
    text = (Path(__file__).resolve().parents[1] / "content" / lang / "row-parallel.md").read_text("utf-8")
    assert row in text


def test_comm_view_link_preset_sets_and_disables_the_bandwidth():
    from tpmath.views import render
    res = render("comm-cost", {"link": "h800", "link_gbps": "12"})        # the typed value is unused
    assert res["controls"]["link_gbps"] == 1600
    assert res["control_state"]["link_gbps"]["disabled"] and res["control_state"]["link_gbps"]["value"] == "1600"
    assert res["notes"]["comm-link"]["args"]["per"] == "200"
    free = render("comm-cost", {"link": "custom", "link_gbps": "12"})
    assert free["controls"]["link_gbps"] == 12 and "link_gbps" not in free["control_state"]
