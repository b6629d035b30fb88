"""verl's plugin hook: ``import verl`` loads this module through the ``verl.plugins`` entry-point group.

verl 0.9.1 imports every entry point of that group at the end of ``verl/__init__.py`` (unless
``VERL_USE_EXTERNAL_PLUGINS=none``; a comma list of names loads only those), so verl's own trainers and
workers see DARE's advantage estimators (``dare_<algo>``, see :mod:`.exports`) without importing DARE.
verl logs a failed plugin import at debug level only, so the names are also logged here at info level.
"""

from __future__ import annotations

import logging

from .exports import register_with_verl

log = logging.getLogger(__name__)

REGISTERED = register_with_verl()
log.info("DARE advantage estimators registered with verl: %s", ", ".join(REGISTERED))
