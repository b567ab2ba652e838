"""The comm-cost figure (views/fig_comm_cost.py) against independent numpy
references, never against the core that drew them: each figure is read back from its element
tree (tests/figure_trees.py), the quantity recomputed in plain numpy from the section's inputs
and compared.  tests/test_figures.py checks the contract and that every number is one of the
tables'."""

from __future__ import annotations

import pytest

from tpmath.views import render, tree

import figure_trees as ft


# ---------------------------------------------------------------- comm-cost

@pytest.mark.parametrize("controls", [{}, {"link_gbps": 400}, {"preset": "gpt-3-175b", "tp": 8},
                                      {"preset": "custom", "hidden": 1024, "seq": 512, "layers": 4, "tp": 2,
                                       "tflops": 10, "link_gbps": 50}])
def test_comm_cost_bars(controls):
    result = render("comm-cost", controls)
    c = result["controls"]
    fig = result["figures"]["comm-cost"]
    svgs = ft.svgs(fig)
    assert len(svgs) == 2      # the desktop drawing and the phone one (narrower bars)
    for svg in svgs:
        keyed = ft.keyed(svg)
        B, L, H, n, K, N = c["batch"], c["seq"], c["hidden"], c["tp"], c["dtype_bytes"], c["layers"]
        # Independently: FLOPs of a GPT layer (24BLH² + 4BL²H forward, ×3 with backward) split over n;
        # 4 AllReduces of B·L·H elements per layer, ring: each rank sends 2(n−1)/n of it.
        t_calc = N * 3 * (24 * B * L * H ** 2 + 4 * B * L ** 2 * H) / n / (c["tflops"] * 1e12)
        t_comm = N * 4 * 2 * (n - 1) / n * B * L * H * K / (c["link_gbps"] * 1e9 / 8)
        serial_calc, serial_comm = ft.size(keyed["serial.calc"], "width"), ft.size(keyed["serial.comm"], "width")
        unit = ft.proportional([(serial_calc, t_calc), (serial_comm, t_comm),
                              (ft.size(keyed["overlap.calc"], "width"), t_calc),
                              (ft.size(keyed["overlap.comm"], "width"), t_comm)], tol=0.15)
        assert unit > 0
        # One layer: compute and its four AllReduces in the step's proportions.
        layer_comm = sum(ft.size(keyed[f"layer.comm.{i}"], "width") for i in range(4))
        assert layer_comm == pytest.approx(ft.size(keyed["layer.calc"], "width") * t_comm / t_calc, abs=0.3)  # 5 × 0.05 px
        shown = [ft.num(n["x"]) for n in tree.walk(svg) if n["t"] == "text" and n.get("x") and str(n["x"]).endswith(" ms")]
        for t in (t_calc, t_comm, t_calc + t_comm, max(t_calc, t_comm)):
            assert any(abs(v - t * 1e3) <= 5e-4 * max(1, t * 1e3) for v in shown), (t, shown)
        assert ft.ranks(fig) == set()


@pytest.mark.parametrize("name", ["comm-cost"])
def test_section_has_its_figure(name):
    figures = render(name)["figures"]
    assert list(figures) == [name]
    for svg in ft.svgs(figures[name]):
        assert svg["c"][0]["x"]["key"].startswith("fig.")      # a translated title (the accessible name)
