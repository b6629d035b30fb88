"""Registers the built-in advantage estimators, policy losses, likelihood estimators and algorithms. Each name
is written once, in the decorator of its function or class (``@advantage``, ``@policy_loss``, ``@estimator``,
``@algorithm``): importing the modules below runs those decorators. The modules are small (torch and pydantic
only, both already loaded by anything that trains). Also the target of the ``dare.plugins`` entry point for
this package."""

from . import advantages  # noqa: F401
from .algorithms import bgpo, cj_grpo, coupled_grpo, d1, dipo, ebpo, just_grpo, mdpo, preference, sft, spg, trace_rl  # noqa: F401
from .algorithms import d_treerpo as _d_treerpo_algorithm  # noqa: F401
from .algorithms import espo as _espo_algorithm  # noqa: F401
from .algorithms import gdsd as _gdsd_algorithm  # noqa: F401
from .algorithms import rldf as _rldf_algorithm  # noqa: F401
from .algorithms import unigrpo as _unigrpo_algorithm  # noqa: F401
from .algorithms import wd1 as _wd1_algorithm  # noqa: F401
from .estimators import composite, elbo, espo, masked, sandwich, step_prediction, stratified, trajectory  # noqa: F401
from .estimators import denoiser as _denoiser_estimator  # noqa: F401
from .estimators import random_masks as _random_masks_estimator  # noqa: F401
from .estimators import replay as _replay_estimator  # noqa: F401
from .estimators import transition as _transition_estimator  # noqa: F401
from .losses import bounds, ppo, segment, sequence, steps  # noqa: F401
from .losses import draws as _draws_loss  # noqa: F401
from .losses import elbo as _elbo_loss  # noqa: F401
from .losses import preference as _preference_loss  # noqa: F401
from .losses import regression as _regression_loss  # noqa: F401
from .losses import replay as _replay_loss  # noqa: F401
from .losses import sandwich as _sandwich_loss  # noqa: F401
from .losses import weighted as _weighted_loss  # noqa: F401
