"""Smoke test of benchmarks/run.py --smoke (every measurement once, at its smallest): it runs,
exits 0, prints its table and writes JSON with every section filled.  No timing is asserted (the
machine is shared; figures are noisy).  The full run and --quick stay commands (README)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.browser


def _positive(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "latest.json"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run.py"), "--smoke", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=1800)   # a loaded machine: minutes
    return proc, out


def test_smoke_run_exits_0_and_prints_the_table(smoke_run, record_property):
    proc, out = smoke_run
    record_property("benchmark_table", proc.stdout)   # printed at the end of the run (conftest.py)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for label in ("(1) time to live tables, cold", "(1) time to live tables, warm",
                  "(1s) time to ready, repeat visit from the memory snapshot", "(2) control latency: stage",
                  "(P7) before ready: stage", "(8) precomputed results en/index.html",
                  "(3) first contentful paint", "(4) bytes en/index.html", "(5) build time", "(6) MLP",
                  "(7) Lighthouse en/index.html"):
        assert label in proc.stdout, label
    assert out.is_file()


def test_json_has_every_section_with_numbers(smoke_run):
    proc, out = smoke_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    assert data["mode"] == "smoke" and "errors" not in data
    br = data["browser"]
    for visit in ("cold", "warm", "snapshot", "snapshot_ready"):
        block = br["time_to_live"][visit]
        assert block["subject"]["n"] == block["baseline"]["n"] == block["ratio"]["n"] >= 1
        assert all(_positive(v) for v in block["samples"]["subject"] + block["samples"]["baseline"])
    for kind in ("stage", "tp", "shards", "target", "shift"):
        lat = br["control_latency"][kind]
        assert lat["failures"] == 0
        assert lat["applied_ms"]["n"] >= 2 and lat["applied_ms"]["p50"] <= lat["applied_ms"]["p95"] <= lat["applied_ms"]["max"]
    assert br["control_latency"]["calibration_fixed_work_ms"]["n"] == 100   # 20 per control kind
    for name in ("stage × tp", "target × shards"):                          # a reader's pace
        pace = br["reader_pace"][name]
        # at a reader's pace the states one step away were computed ahead and sent to the page
        assert pace["failures"] == 0 and pace["applied_ms"]["n"] == 4 and pace["kept"] >= 2, pace
        assert 0 < pace["applied_ms"]["p50"] <= pace["applied_ms"]["p95"] <= pace["applied_ms"]["max"]
    for kind in ("stage", "tp", "collective", "ranks", "shards", "target"):   # answered while loading
        pre = br["precomputed_latency"][kind]
        assert pre["failures"] == 0 and pre["runtime"] == "loading", pre
        assert pre["applied_ms"]["n"] >= 2 and pre["applied_ms"]["p50"] <= pre["applied_ms"]["p95"]
    for key in ("new_state_latency", "new_state_settled"):                 # states never computed before
        for name, row in br[key].items():
            assert row["failures"] == 0 and row["applied_ms"]["n"] >= 1, (key, name, row)
    assert _positive(br["first_paint"]["ratio"]["median"])
    pages = {p["page"] for p in data["bytes"]["pages"]}
    assert {"en/index.html", "zh/index.html", "en/row-parallel.html", "zh/row-parallel.html"} <= pages
    for p in data["bytes"]["pages"]:
        if p["page"].endswith("/contents.html"):
            # the contents pages hold no demo: no results, no wheel, no runtime to fetch
            assert p["results"]["files"] == {} and p["parts"]["wheel"]["raw"] == 0, p
            assert 0 < p["gzip"] < p["raw"]
            continue
        assert p["results"]["files"] and 0 < p["results"]["gzip"] < p["results"]["raw"]
        assert p["parts"]["wheel"]["raw"] > 0 and p["parts"]["js"]["raw"] > 0 and 0 < p["gzip"] < p["raw"]
    assert data["bytes"]["runtime"]["raw"] > 10_000_000        # wasm + stdlib + numpy: megabytes
    build = data["build"]
    assert _positive(build["wall"]["median"])
    assert {"content", "math", "views", "render"} <= set(build["phases"])
    for key in ("mlp", "vocab_ce"):
        core = data["core"][key]
        assert _positive(core["ratio"]["median"]) and core["peak_bytes"]["subject"] > 0
    lh = data["lighthouse"]["pages"]
    assert [p["page"] for p in lh] == ["en/index.html"] and lh[0]["runs"] == 1
    assert set(lh[0]["scores"]) == {"performance", "accessibility", "best-practices", "seo"}
    assert all(0 <= v <= 1 for v in lh[0]["scores"].values())
    assert _positive(lh[0]["metrics"]["fcp_ms"]) and lh[0]["metrics"]["lcp_ms"] >= lh[0]["metrics"]["fcp_ms"]
    # Correctness next to speed: the sharded results are the unsharded ones up to rounding.
    assert data["core"]["mlp"]["max_abs_err"]["Y"] < 1e-3
    assert data["core"]["vocab_ce"]["max_abs_err"]["loss"] < 1e-4
    assert data["core"]["vocab_ce"]["sizes"]["padded_vocab"] == 51200   # Megatron: 50257 -> 51200 at tp 8
