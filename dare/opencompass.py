"""DARE's OpenCompass config builders, importable from an OpenCompass config's base block::

    from mmengine.config import read_base
    with read_base():
        from dare.opencompass import dare_datasets, dare_model

mmengine reads a config with ``with read_base():`` (or any top-level import of a package) in "lazy" mode:
a top-level import becomes a placeholder that cannot be called, and a base module is located as a file
under its top package's folder (this file) and executed as a config. So this module stays a config file:
its first import only declares the names (mmengine then leaves them out of the config it dumps for its
task processes), and ``__import__``, a plain builtin call, binds them to the real functions.
See :mod:`dare.backends.opencompass.configs`.
"""

from dare.backends.opencompass.configs import dare_dataset, dare_datasets, dare_model  # noqa: F401

_bridge = __import__("dare.backends.opencompass.configs", fromlist=["dare_model"])
# the deliberate second binding: the import above declares the names for mmengine, this one makes them real
dare_dataset, dare_datasets, dare_model = _bridge.dare_dataset, _bridge.dare_datasets, _bridge.dare_model  # noqa: F811
del _bridge
