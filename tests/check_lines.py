"""Rank 0's check lines of a real run against the expected ones (tpmath.ranks.verdict).

A verdict is ``<measured difference> (tolerance <tol>) <✓|✗>``.  The measured difference of a real
run is its own (PyTorch adds in another order than numpy): the lines must be the same with that
number masked, and the number itself must be on the side of the tolerance its mark says.
"""

from __future__ import annotations

import re

from tpmath import ranks

MINUS = "\u2212"
ERR = r"(?:<\u00a01e\u221215|\d\.\de\u2212?\d+|0|NaN)"
TOL = r"(?P<tol>\d\.\de\u2212?\d+)"
# "4.4e−16 (tolerance 7.1e−12) ✓" (en) or "4.4e−16（容差 7.1e−12）✓" (zh)
VERDICT = re.compile(r"(?P<err>" + ERR + r")(?P<mid>(?: \(tolerance |（容差 )" + TOL + r"(?:\) |）))(?P<mark>[✓✗])$")


def value(text: str) -> float:
    """The number behind an fmt.err text ("< 1e−15" as 1e-15)."""
    return 1e-15 if text.startswith("<") else float(text.replace(MINUS, "-"))


def masked(line: str) -> str:
    """The line with its measured difference replaced by "·"."""
    return VERDICT.sub(lambda m: "·" + m["mid"] + m["mark"], line)


def verdicts(lines: list[str]) -> list[re.Match]:
    return [m for m in (VERDICT.search(line) for line in lines) if m]


def assert_same_check(got: list[str], want: list[str]) -> None:
    """Same lines but for the measured differences; each difference agrees with its mark."""
    assert [masked(x) for x in got] == [masked(x) for x in want], (got, want)
    found = verdicts(got)
    assert len(found) == len(verdicts(want)), (got, want)
    for m in found:
        below = value(m["err"]) < value(m["tol"]) or m["err"].startswith("<")
        assert below == (m["mark"] == ranks.OK), m.group(0)
