"""Summaries of repeated measurements (the machine is shared and noisy: medians and spread)."""

from __future__ import annotations

import statistics


def quantile(values: list[float], q: float) -> float:
    """Linear-interpolated quantile, q in [0, 1] (numpy's default 'linear' method)."""
    xs = sorted(values)
    if not xs:
        return float("nan")
    pos = (len(xs) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def summary(values: list[float], digits: int = 4) -> dict:
    """median, min, max, IQR (q25, q75) and n of a list of samples."""
    vals = [float(v) for v in values]
    if not vals:
        return {"n": 0, "median": None, "min": None, "max": None, "q25": None, "q75": None}
    r = lambda v: round(v, digits)  # noqa: E731
    return {"n": len(vals), "median": r(statistics.median(vals)), "min": r(min(vals)),
            "max": r(max(vals)), "q25": r(quantile(vals, 0.25)), "q75": r(quantile(vals, 0.75))}


def latency_summary(values_ms: list[float]) -> dict:
    """p50 / p95 / max (and n) of latencies in milliseconds."""
    vals = [float(v) for v in values_ms]
    if not vals:
        return {"n": 0, "p50": None, "p95": None, "max": None}
    return {"n": len(vals), "p50": round(quantile(vals, 0.5), 2), "p95": round(quantile(vals, 0.95), 2),
            "max": round(max(vals), 2), "mean": round(statistics.fmean(vals), 2)}


def ratios(num: list[float], den: list[float]) -> list[float]:
    """Pairwise ratios of interleaved runs (run i of the subject ÷ run i of its baseline)."""
    return [a / b for a, b in zip(num, den) if b]


def ratio_block(subject: list[float], baseline: list[float], target: float | None = None,
                unit: str = "s") -> dict:
    """Subject and baseline samples, their summaries, and the pairwise ratio summary."""
    rs = ratios(subject, baseline)
    block = {"unit": unit, "subject": summary(subject), "baseline": summary(baseline),
             "ratio": summary(rs), "samples": {"subject": [round(v, 5) for v in subject],
                                                "baseline": [round(v, 5) for v in baseline]}}
    if target is not None:
        block["target"] = target
        block["meets_target"] = bool(rs) and statistics.median(rs) <= target
    return block
