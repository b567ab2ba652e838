"""The record of one runnable example (a *topic*), from which the real runner's command line, the
plans and the expected output derive."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

JSON = "as JSON"
DTYPE_HELP = ("float64 | float32 | float16 (float16: PyTorch's CPU kernels accumulate in float32, the "
              "simulation rounds every float16 operation, so the last printed digits can differ)")


@dataclass(frozen=True)
class Opt:
    """One option of an example: ``--name VALUE`` (``None`` default = not given)."""

    name: str
    default: str | None
    help: str
    flag: bool = False          # a bare ``--name`` (true when given), no value

    @property
    def dest(self) -> str:
        return self.name.replace("-", "_")


def opts(*specs: tuple[str, str | None, str]) -> tuple[Opt, ...]:
    return tuple(Opt(*s) for s in specs)




@dataclass(frozen=True)
class Topic:
    """One example that runs on real ranks.

    ``plan(options)`` validates the filled-in options into the inputs both the real run and the
    simulation use (``world`` = the processes it needs, ``core`` = the core's result);
    ``expected(plan)`` is what each rank prints and rank 0's check lines; ``real_module`` names
    the :mod:`tpmath.real` module whose ``run(plan, ctx)`` does it with torch.distributed.
    """

    name: str
    help: str
    options: tuple[Opt, ...]
    plan: Callable[[dict], dict]
    expected: Callable[[dict], tuple[list, list]]
    real_module: str
