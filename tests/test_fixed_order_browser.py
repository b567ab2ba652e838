"""The pages that print a measured float64 error (attention, transformer layer, sequence
parallelism) compute the same bits in CPython and in real Pyodide (issue 25 item 5).

The error shown is rounding noise (1e−16 … 1e−14): its digits are whatever the order of the
additions and the math library made them.  With numpy's ``@`` (OpenBLAS here, plain loops in
Pyodide), its SIMD ``exp``/``tanh`` and Python 3.12's compensated ``sum()``, 51 of 134 such errors
differed between the two runtimes; the cores now use ``tpmath.kernels.*_fixed``.  This test runs
every page setting of the three cores in both and compares every output and gradient bit for bit
(a hash of the bytes), and every measured error exactly.
"""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.browser

# Run in both runtimes; the last expression is the JSON of {setting: {key: error, "#": hash}}.
PROGRAM = r'''
import hashlib, json
import numpy as np
from tpmath import attention as att, layer as lay, sp_layer as sp
from tpmath.errors import TPMathError

def digest(res):
    out = {k: float(v) for k, v in res.max_abs_err.items()}
    h = hashlib.sha256()
    for part in (res.reference, res.sharded):
        for k in sorted(res.max_abs_err):
            h.update(np.ascontiguousarray(np.asarray(getattr(part, k), dtype=np.float64)).tobytes())
    out["#"] = h.hexdigest()
    return out

def settings():
    for tp in (1, 2, 4, 8):
        for H in (1, 2, 4, 8):
            for K in (1, 2, 4, 8):
                for causal in (False, True):
                    for hidden in (8, 16):
                        yield f"attention {tp} {H} {K} {causal} {hidden}", lambda *a: att.run_attention(*a), \
                            (tp, H, K, 4, 1, hidden, 0, causal)
    for seq in (2, 3, 5, 6):
        for mistake in ("none", "f-and-g-swapped", "kv-not-replicated", "kv-grad-not-summed", "scale-local-width"):
            yield f"attention seq {seq} {mistake}", lambda *a: att.run_attention(*a), \
                (2, 4, 2, seq, 1, 8, 0, True, mistake)
    for tp in (1, 2, 4):
        for H in (2, 4, 8):
            for K in (1, 2, 4, 8):
                for causal in (False, True):
                    yield f"layer {tp} {H} {K} {causal}", lambda *a: lay.run_layer(*a), (tp, H, K, 4, 1, 8, 32, 0, causal)
    for tp in (1, 2, 4):
        for seq in (4, 8):
            for mistake in ("none", "ln-grad-not-reduced", "same-dropout-seed", "gather-wrong-dim"):
                for p in (0.0, 0.1, 0.25, 0.5):
                    for keep in ("regather", "keep"):
                        yield f"sp {tp} {seq} {mistake} {p} {keep}", \
                            lambda *a: sp.run_sp_layer(tp=a[0], seq=a[1], batch=1, hidden=4, ffn=8, seed=0,
                                                       mistake=a[2], dropout=a[3], backward_input=a[4]), \
                            (tp, seq, mistake, p, keep)

out = {}
for name, run, args in settings():
    try:
        out[name] = digest(run(*args))
    except TPMathError:
        pass
json.dumps(out)
'''

OPEN_JS = """async ([base, program]) => {
  const py = await loadPyodide({indexURL: base + "pyodide/"});
  const lock = await (await fetch(base + "pyodide/pyodide-lock.json")).json();
  await py.loadPackage(base + "pyodide/" + lock.packages.numpy.file_name);
  const wheel = await (await fetch(base + "download/tpmath-0.1.0-py3-none-any.whl")).arrayBuffer();
  py.unpackArchive(wheel, "wheel", {extractDir: "/lib/python3.12/site-packages"});
  return py.runPython(program);
}"""


def cpython() -> dict:
    body, last = PROGRAM.rstrip().rsplit("\n", 1)
    scope: dict = {}
    exec(body, scope)                     # noqa: S102 -- this file's own program
    return json.loads(eval(last, scope))  # noqa: S307


def test_the_cores_compute_the_same_bits_in_cpython_and_pyodide(new_context, site_url, built_site):
    wheel = next((built_site / "download").glob("tpmath-*.whl"))
    ctx = new_context()
    page = ctx.new_page()
    blank = f"{site_url}fixed-order-test.html"          # a page of the site's origin (no file is added)
    page.route(blank, lambda route: route.fulfill(body="<!doctype html><title>t</title>", content_type="text/html"))
    page.goto(blank)
    page.add_script_tag(url=f"{site_url}pyodide/pyodide.js")
    program = PROGRAM.replace("tpmath-0.1.0-py3-none-any.whl", wheel.name)
    live = json.loads(page.evaluate(OPEN_JS.replace("tpmath-0.1.0-py3-none-any.whl", wheel.name),
                                    [site_url, program]))
    here = cpython()
    assert set(live) == set(here) and len(here) > 300
    differ = [name for name in here if live[name] != here[name]]
    assert not differ, [(n, {k: (live[n][k], here[n][k]) for k in here[n] if live[n][k] != here[n][k]}) for n in differ[:5]]
