# OpenCompass config: DARE's planning suite (countdown + sudoku: DARE data, prompts and verifiers) on the
# shipped tiny-llada checkpoint through DARE's torch engine. Run it with OpenCompass's own CLI, wrapped so
# that a failed task is an error instead of an empty score table:
#     python -m dare.backends.opencompass configs/opencompass/eval_dare_planning_tiny.py -w outputs/oc
# For a real model: dare_model("fastdllm", "llada-8b-instruct", model_path="~/models/llada-8b-instruct",
#                              decoding=dict(gen_length=256, steps=256, block_length=32), num_gpus=1, ...)
# __import__ instead of an import statement: mmengine turns a config with import statements of packages
# into a "lazy" config, in which calling a function is not allowed.
dare = __import__("dare.backends.opencompass.configs", fromlist=["configs"])
datasets = dare.dare_datasets("planning", limit=4)
models = [dare.dare_model("torch", "tiny-llada", benchmarks=["countdown", "sudoku"], engine_options={"threads": 1})]
