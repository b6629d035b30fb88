"""DARE as a model inside the field's harnesses: lm-eval's ``dare`` model and inspect_ai's ``dare`` provider.

Both hand their settings over as KEY=VALUE pairs read by the one ``--set`` grammar (harness/overrides.py), so
``--model_args remasking=d3llm,extra.d3llm_entropy_threshold=0.5`` and ``-M extra.d3llm_entropy_threshold=0.5``
mean what ``dare-eval --set`` means; a :class:`~.session.Session` resolves the model, engine and decoding once
through DARE's resolver and decodes what the harness asks for. Importing this package imports neither harness:

* :mod:`.lm_eval_model` ``DareLM``, registered in lm-eval's model registry as ``dare`` on import;
* :mod:`.lm_eval_cli`   ``dare-lm-eval``: registers it and hands over to lm-eval's own CLI (lm-eval 0.4.13
  discovers no models from other packages), then writes DARE's run record of each task;
* :mod:`.inspect_provider` the ``dare`` model provider of inspect_ai (its ``inspect_ai`` entry point).
"""
