"""Entry point (group ``dare.plugins``) that registers this package's engines with the harness.

Only lazy ``module:attr`` strings: importing this module imports no torch.
"""

from dare.harness.registry import engines

engines.register("replay", "dare.backends.engines.replay:ReplayEngine")
engines.register("torch", "dare.backends.engines.torch:TorchEngine")
