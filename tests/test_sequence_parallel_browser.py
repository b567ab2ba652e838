"""Page 4 in real Chromium + Pyodide: live = build time = CPython = the command line.

For the sections ``sp-layer`` and ``memory`` of ``sequence-parallel.html`` (both languages):
the live tables in the default state equal the build-time HTML, every setting below equals
``tpmath.views.render`` in CPython cell for cell, and the numbers equal what
``python -m tpmath sp-layer|memory … --json`` prints in another process; the figures live equal
the build-time ones and CPython's, element for element.
"""

from __future__ import annotations

import numpy as np
import pytest

from test_pages_browser import BOOT_TIMEOUT_MS, LivePage, cli, diff, expected  # noqa: F401
from test_frontend_browser import FIGURES_JS, py_ser
from tpmath import fmt

pytestmark = pytest.mark.browser

SLUG = "sequence-parallel.html"
MINUS = "\u2212"
SPACES = str.maketrans("", "", "\u2009\u202f\u00a0 ")   # digit grouping in fmt.integer

SP_SETTINGS = [
    {},
    {"tp": "4", "seq": "8", "step": "grad-scatter"},
    {"tp": "2", "seq": "8", "step": "gather", "mistake": "gather-wrong-dim"},
    {"tp": "4", "seq": "8", "step": "tp", "dropout": "0.25"},
    {"tp": "2", "seq": "4", "step": "grad-ln", "mistake": "ln-grad-not-reduced"},
    {"tp": "4", "seq": "4", "step": "residual", "mistake": "same-dropout-seed", "dropout": "0.5"},
    {"tp": "1", "seq": "8", "step": "grad-w"},
    {"tp": "4", "seq": "8", "step": "grad-scatter", "backward_input": "keep"},
]
MEM_SETTINGS = [
    {},
    {"sp": "on", "recompute": "selective"},
    {"preset": "paper-22b", "optimizer": "megatron-fp16", "sp": "on"},
    {"preset": "gpt-3-175b", "seq": "2048", "tp": "8", "recompute": "full", "sp": "on"},
    {"preset": "custom", "hidden": "2048", "heads": "16", "layers": "24", "vocab": "50304", "seq": "2048",
     "batch": "2", "tp": "4", "pp": "2", "sp": "on", "optimizer": "mixed-adam"},
    {"attention": "flash"},
    {"attention": "flash", "sp": "on"},
]
KEY = {"ln": ("X", "A"), "gather": ("A", "A_full"), "tp": ("Hd", "O_partial"), "scatter": ("O_partial", "O"),
       "residual": ("O", "Y"), "grad-gather": ("G_Y", "G_O_full"), "grad-w": ("G_W2", "G_W1"),
       "grad-scatter": ("G_A_partial", "G_A"), "grad-ln": ("G_A", "G_X")}


# The cells of one live table with their structure: a grid cell (table.grid) as rows of its numbers'
# texts, a rank tag as [its text, its data-rank], any other cell as its text.
CELLS_JS = """([demo, name]) => {
  const t = demo.querySelector('table[data-table="' + name + '"]');
  const cell = (c) => {
    const g = c.querySelector("table.grid");
    if (g) return Array.from(g.rows).map(r => Array.from(r.cells).map(d => d.textContent));
    const tag = c.querySelector(".rank-tag");
    if (tag) return [tag.textContent, tag.getAttribute("data-rank")];
    return c.textContent;
  };
  return Array.from(t.tBodies[0].rows).map(r => Array.from(r.cells).map(cell));
}"""


def mat(cell: list) -> np.ndarray:
    """A grid cell's rows of numbers (U+2212 minus) as an array."""
    return np.array([[float(x.replace(MINUS, "-")) for x in row] for row in cell], dtype=float)


def live_rows(live: LivePage, section: str, name: str) -> list:
    return live.page.evaluate(CELLS_JS, [live.demo(section), name])


@pytest.fixture(scope="module")
def pages(new_context, site_url):
    ctx = new_context()
    out = {}
    for lang in ("en", "zh"):
        page = ctx.new_page()
        live = LivePage(page, lang, SLUG)
        page.goto(f"{site_url}{lang}/{SLUG}", wait_until="domcontentloaded")
        live.static = {s: live.snapshot(s) for s in ("sp-layer", "memory")}
        out[lang] = live
    for live in out.values():
        live.page.wait_for_function("() => document.documentElement.dataset.runtime !== 'loading'",
                                    timeout=BOOT_TIMEOUT_MS)
        assert live.page.evaluate("document.documentElement.dataset.runtime") == "ready"
    yield out
    for live in out.values():
        live.page.close()


def test_default_state_live_equals_build_time(pages):
    problems = []
    for lang, live in pages.items():
        for section, away in (("sp-layer", {"tp": "4"}), ("memory", {"tp": "4"})):
            static = live.static[section]
            moved = live.set(section, away)
            assert moved["tables"] != static["tables"], section
            back = live.set(section, dict(static["controls"]))
            assert back["msg"] == ""
            problems += diff(f"{lang} {section}", back, static)
    assert problems == [], "\n".join(problems)


def check_sp_against_cli(controls: dict, state: dict, live: LivePage) -> int:
    c = {"tp": "2", "seq": "4", "mistake": "none", "dropout": "0", "step": "gather", "backward_input": "regather",
         **controls}
    if c["tp"] == "1":
        c["mistake"] = "none"
    if c["mistake"] == "same-dropout-seed" and c["dropout"] == "0":
        c["dropout"] = "0.25"
    out = cli("sp-layer", "--tp", c["tp"], "--seq", c["seq"], "--batch", "1", "--mistake", c["mistake"],
              "--dropout", c["dropout"], "--backward-input", c["backward_input"])
    n = 0
    rows = live_rows(live, "sp-layer", "sp-ranks")
    assert len(rows) == int(c["tp"])
    for row, rk in zip(rows, out["ranks"]):
        assert row[0] == [f"R{rk['rank']}", str(rk["rank"])]
        for cell, key in zip(row[2:], KEY[c["step"]]):
            want = np.asarray(rk[key], dtype=float)
            want = want.reshape(-1, want.shape[-1])
            got = mat(cell)
            assert got.shape == want.shape and np.max(np.abs(got - want)) <= 5.01e-4, (key, rk["rank"])
            n += 1
    for row, rk in zip(live_rows(live, "sp-layer", "sp-ln"), out["ranks"]):
        assert np.max(np.abs(mat(row[2]) - np.asarray(rk["G_gamma_partial"]))) <= 5.01e-5
        assert np.max(np.abs(mat(row[3]) - np.asarray(rk["G_beta_partial"]))) <= 5.01e-5
        n += 2
    comm = state["tables"]["sp-comm"]["rows"]
    sp_rows = [r for r in comm if r[1] in ("g", "ḡ", "γ, β")]
    assert [int(r[4].translate(SPACES)) for r in sp_rows] == [e["elements"] for e in out["comm"]]
    check = {row[0]: row for row in state["tables"]["sp-check"]["rows"]}
    names = {"Y": "Y", "loss": "ℒ", "G_X": "G_X", "G_gamma": "G_γ", "G_beta": "G_β", "G_W1": "G_W₁", "G_W2": "G_W₂"}
    for key, name in names.items():
        # the measured error, the command line's digits (the core computes in a fixed order)
        assert check[name][2] == fmt.err(out["max_abs_err"][key]), key
        assert check[name][3] == fmt.err(out["tolerances"][key]), key             # the tolerance: its own column
        n += 1
    v = state["values"]
    assert v["sp-loss"] == fmt.num(out["sharded"]["loss"]) and v["sp-reference-loss"] == fmt.num(out["reference"]["loss"])
    return n + 2


def mem_cli_args(c: dict) -> list[str]:
    c = {"preset": "llama-2-7b", "seq": "4096", "batch": "1", "tp": "8", "pp": "1", "sp": "off", "recompute": "none",
         "optimizer": "megatron-bf16", "attention": "eager", **c}
    args = ["memory", "--recompute", c["recompute"], "--optimizer", c["optimizer"], "--attention", c["attention"]]
    if c["sp"] == "on" and c["tp"] != "1":
        args.append("--sp")
    if c["preset"] == "custom":
        return args + [f"--{k}={c[k]}" for k in ("hidden", "heads", "layers", "vocab", "seq", "batch", "tp", "pp")]
    args += ["--preset", c["preset"]]
    if not c["preset"].startswith("paper-"):     # the paper's presets fix s, b, t and p themselves
        args += [f"--{k}={c[k]}" for k in ("seq", "batch", "tp", "pp")]
    return args


def check_memory_against_cli(controls: dict, state: dict, live: LivePage) -> int:
    out = cli(*mem_cli_args(controls))
    per = out["per_rank_bytes"]
    rows = state["tables"]["mem-rank"]["rows"]
    got = [int(r[2].translate(SPACES)) for r in rows]
    assert got == [round(per[k]) for k in ("parameters", "gradients", "optimizer", "activations")]
    assert state["values"]["mem-total"] == fmt.nbytes(per["total"])
    assert state["values"]["mem-per-layer"] == fmt.nbytes(out["activation_bytes_per_layer"])
    assert state["values"]["mem-params"] == fmt.integer(out["parameters"]["per_rank"])
    t2 = [r[2] for r in state["tables"]["mem-table2"]["rows"]]
    assert t2[0] == fmt.nbytes(out["table2"]["none"]) and fmt.nbytes(out["table2"]["tp"]) in t2
    return 7


@pytest.mark.parametrize("section", ["sp-layer", "memory"])
def test_live_equals_cpython_and_the_command_line(pages, section):
    settings, check = (SP_SETTINGS, check_sp_against_cli) if section == "sp-layer" else \
        (MEM_SETTINGS, check_memory_against_cli)
    problems, checked = [], 0
    for lang, live in pages.items():
        base = dict(live.static[section]["controls"])
        for setting in settings:
            controls = {**base, **setting}
            state = live.set(section, controls)
            assert state["msg"] == "" and state["invalid"] == [], (lang, setting, state["msg"])
            problems += diff(f"{lang} {section} {setting}", state, expected(section, controls, lang))
            checked += check(controls, state, live)     # what the page was set to: its start + the setting
        live.set(section, base)
    assert checked > 0
    assert problems == [], "\n".join(problems)
    for live in pages.values():
        assert live.errors == [], live.errors


# ---- figures: live = build time = CPython ------------------------------------------------------

# (the same DOM / CPython serialisations as tests/test_frontend_browser.py)


FIGURE_SETTINGS = {"sp-layer": [{"tp": "4", "seq": "8", "step": "grad-w", "dropout": "0.25"},
                                {"tp": "2", "seq": "8", "mistake": "ln-grad-not-reduced", "step": "grad-ln"}],
                   "memory": [{"preset": "paper-22b", "sp": "on", "recompute": "selective"}]}


def test_figures_live_equal_build_time_and_cpython(pages):
    from tpmath import views
    problems = []
    for lang, live in pages.items():
        for section, settings in FIGURE_SETTINGS.items():
            base = dict(live.static[section]["controls"])
            static = live.page.evaluate(FIGURES_JS, live.demo(section))
            want = {k: py_ser(v, lang) for k, v in views.render(section, base, lang)["figures"].items()}
            if static != want:
                problems.append(f"{lang} {section}: build-time figures != CPython's")
            for setting in settings + [{}]:
                controls = {**base, **setting}
                live.set(section, controls)
                got = live.page.evaluate(FIGURES_JS, live.demo(section))
                want = {k: py_ser(v, lang) for k, v in views.render(section, controls, lang)["figures"].items()}
                if got != want:
                    problems.append(f"{lang} {section} {setting}: live figures != CPython's "
                                    f"{sorted(got)} / {sorted(want)}")
    assert problems == [], "\n".join(problems)
