"""The site's examples on real ranks: ``torchrun --nproc-per-node N -m tpmath.real EXAMPLE``.

One process per rank; each holds only its shard, calls the real collectives of
``torch.distributed`` (gloo on CPU, nccl with one GPU per rank) and prints its local tensors
in the site's format; rank 0 then compares with the same computation in one process.  What
every rank prints is also computed without torch by :mod:`tpmath.ranks` (the page shows it
next to each section, and the tests compare both).

This package is the only part of tpmath that imports torch (an optional extra:
``pip install -e '.[real]'`` in a checkout, or the site's wheel with ``[real]``); the core and
the site never import it.
"""
