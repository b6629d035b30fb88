"""Algorithms that poison their loss, registered in the test process and in every Ray worker.

The ``dare.plugins`` entry points are how a user's algorithm reaches verl workers; a test cannot install a
distribution, so its Ray cluster names :func:`register` as the ``worker_process_setup_hook`` instead."""

from __future__ import annotations


def register() -> None:
    """``distributed/nan_first``: NaN loss at inner update 0 of every step; ``distributed/nan_always``: always."""
    from dare.harness.registry import algorithms
    from dare.trainers import plugin  # noqa: F401  (the built-in algorithms, D1 among them)
    from dare.trainers.algorithms.d1 import D1

    for name, bad in (("distributed/nan_first", {0}), ("distributed/nan_always", None)):
        if name in algorithms.snapshot():
            continue

        def loss(self, policy, batch, inner_step, _bad=bad):
            out = D1.loss(self, policy, batch, inner_step)
            if _bad is None or inner_step in _bad:
                out.loss = out.loss * float("nan")
            return out

        algorithms.register(name, type(name.split("/")[1], (D1,), {"name": name, "loss": loss,
                                                                    "__module__": __name__}))
