# OpenCompass config mixing a stock OpenCompass dataset (gsm8k, OpenCompass's own prompt, post-processing
# and evaluator) with DARE benchmarks (DARE's data, prompts and verifiers), on the shipped tiny-llada:
#     python -m dare.backends.opencompass configs/opencompass/eval_dare_mixed_tiny.py -w outputs/oc
# Stock datasets read their data as OpenCompass does (./data/gsm8k/, or $COMPASS_DATA_CACHE/data/gsm8k/).
# DARE's model decodes its own gen_length on every dataset: the stock max_out_len is replaced, and
# the console (and the task's log) says so. Both imports sit inside read_base(), as OpenCompass's own do.
from mmengine.config import read_base

with read_base():
    from opencompass.configs.datasets.gsm8k.gsm8k_0shot_gen_a58960 import gsm8k_datasets

    from dare.opencompass import dare_datasets, dare_model

# The first 4 gsm8k problems only: the tiny model is a demo, not a gsm8k solver.
gsm8k_first = [dict(d, reader_cfg=dict(d["reader_cfg"], test_range="[0:4]")) for d in gsm8k_datasets]
datasets = [*gsm8k_first, *dare_datasets("countdown", limit=4)]
models = [dare_model("torch", "tiny-llada", engine_options={"threads": 1})]
