"""The record of one runnable example (a *topic*), from which the real runner's command line, the
plans and the expected output derive."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

@dataclass(frozen=True)
class Opt:
    """One option of an example: ``--name VALUE`` (``None`` default = not given).  Its help is
    content: ``cli.real.<example>.options.<dest>`` in content/i18n/<lang>.cli.toml."""

    name: str
    default: str | None
    flag: bool = False          # a bare ``--name`` (true when given), no value

    @property
    def dest(self) -> str:
        return self.name.replace("-", "_")


def opts(*specs: tuple) -> tuple[Opt, ...]:
    """(name, default) or (name, default, True) for a flag."""
    return tuple(Opt(*s) for s in specs)




@dataclass(frozen=True)
class Topic:
    """One example that runs on real ranks.

    ``plan(options)`` validates the filled-in options into the inputs both the real run and the
    simulation use (``world`` = the processes it needs, ``core`` = the core's result);
    ``expected(plan)`` is what each rank prints and rank 0's check lines; ``real_module`` names
    the :mod:`tpmath.real` module whose ``run(plan, ctx)`` does it with torch.distributed.
    Its help is content (``cli.real.<name>.about``, ``cli.real.<name>.options.<dest>``);
    ``help_args`` gives an option's help the values it quotes (``{choices}``, …), from the code
    that checks them, so the help never lists what the example would refuse.
    """

    name: str
    options: tuple[Opt, ...]
    plan: Callable[[dict], dict]
    expected: Callable[[dict], tuple[list, list]]
    real_module: str
    help_args: dict = field(default_factory=dict)
