"""inspect_ai's entry point (``[project.entry-points.inspect_ai]``): registers the ``dare`` model provider.

inspect loads every ``inspect_ai`` entry point when it looks a provider up, so this module stays light: the
provider class (and DARE's engines) are imported only when a ``dare/<model>`` is asked for.
"""

from __future__ import annotations

from inspect_ai.model import modelapi


@modelapi(name="dare")
def dare():
    from .inspect_provider import DareAPI

    return DareAPI
