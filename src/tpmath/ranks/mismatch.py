"""A mismatched collective: the checker's verdict, then the real run (with a timeout)."""

from __future__ import annotations

from .. import mismatch
from ..errors import TPMathError
from ..i18n import Text
from ..validate import as_choice, as_float
from .topic import Topic, opts

REAL_MISMATCH_CALLS = ("all-reduce", "all-gather", "broadcast", "barrier")


def _plan_mismatch(o: dict) -> dict:
    scenario = as_choice("scenario", o["scenario"], tuple(mismatch.SCENARIOS))
    timeout = as_float("timeout", o["timeout"], 1.0, 600.0)
    calls = mismatch.validate_calls(mismatch.SCENARIOS[scenario])
    for r, seq in enumerate(calls):
        for i, c in enumerate(seq):
            if c["name"] not in REAL_MISMATCH_CALLS:
                raise TPMathError("call_not_real", "scenario", where=f"calls[{r}][{i}]", value=c["name"],
                                  choices=", ".join(REAL_MISMATCH_CALLS))
    return {"world": len(calls), "scenario": scenario, "timeout": timeout, "calls": calls,
            "core": mismatch.check_calls(calls)}


def call_text(call: dict) -> str:
    """``#0 all_reduce [4] float32 {0,1}``: a call of a mismatch scenario."""
    name = call["name"].replace("-", "_")
    shape = "[" + ",".join(str(s) for s in call["shape"]) + "]"
    group = "{" + ",".join(str(g) for g in call["group"]) + "}"
    return f"{name} {shape} {call['dtype']} {group}"


# Every reason code tpmath.mismatch gives a hang (its _hang calls; tests/test_i18n.py checks both).
HANG_CODES = ("order", "name_mismatch", "shape_mismatch", "dtype_mismatch", "early_exit", "blocked_peer",
              "group_mismatch", "not_in_group")


def hang_code(code: str) -> Text:
    """The checker's reason code (``order``, ``shape_mismatch`` …) in the reader's words."""
    return Text(f"real.hang_code.{code}")


def _expected_mismatch(p: dict) -> tuple[list, list]:
    res = p["core"]
    hangs = {h.rank: h for h in res.hangs}
    per_rank = []
    for r, seq in enumerate(p["calls"]):
        recs = []
        for i, c in enumerate(seq):
            h = hangs.get(r)
            if h is None or i < h.call_index:
                predicted = Text("real.checker_completes")
            elif i == h.call_index:
                predicted = Text("real.checker_hangs", code=hang_code(h.code))
            else:
                predicted = Text("real.checker_not_reached")
            recs.append((f"#{i} {call_text(c)}", predicted))
        per_rank.append(recs)
    return per_rank, []



TOPICS = (Topic("mismatch", opts(("scenario", "order_swapped"), ("timeout", "10")),
                _plan_mismatch, _expected_mismatch, real_module="mismatch",
                help_args={"scenario": {"choices": tuple(mismatch.SCENARIOS)}}),)
