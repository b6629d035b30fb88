"""``python -m dare.backends.opencompass CONFIG.py``: see :mod:`dare.backends.opencompass.cli`."""

from .cli import main

raise SystemExit(main())
