# OpenCompass config: DARE's planning suite (countdown + sudoku: DARE data, prompts and verifiers) on the
# shipped tiny-llada checkpoint through DARE's torch engine. Run it with OpenCompass's own CLI, or wrapped
# so that a failed task is an error instead of an empty score table:
#     opencompass configs/opencompass/eval_dare_planning_tiny.py -w outputs/oc
#     python -m dare.backends.opencompass configs/opencompass/eval_dare_planning_tiny.py -w outputs/oc
# For a real model: dare_model("fastdllm", "llada-8b-instruct", model_path="~/models/llada-8b-instruct",
#                              decoding=dict(gen_length=256, steps=256, block_length=32), num_gpus=1)
# The builders are imported inside read_base(): mmengine reads a config with a top-level import of a
# package in "lazy" mode, where an imported function cannot be called. Every argument is checked here,
# while OpenCompass reads this file: a typo stops it with one line.
from mmengine.config import read_base

with read_base():
    from dare.opencompass import dare_datasets, dare_model

datasets = dare_datasets("planning", limit=4)
models = [dare_model("torch", "tiny-llada", engine_options={"threads": 1})]
