#!/usr/bin/env bash
# GPU checks for a CUDA machine with PyTorch preinstalled: installs dare (no deps) plus any wheels
# carried in .whl/, runs the 8B-shaped decode benchmark and tests/gpu on CUDA (GPU_TESTS narrows the tests). Writes logs under $OUT if set.
set -uo pipefail
OUT=${OUT:-/tmp/dare-gpu}
mkdir -p "$OUT"
site=/tmp/dare-site
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" .whl/*.whl || exit 1
fi
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --target "$site" . || exit 1
export PYTHONPATH="$site" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" | tee -a "$OUT/gpu.txt"
# 8B-shaped decode speed first (the figures the fast engines exist for), then the GPU tests. Batch 16 by
# default: at batch 1 an 8B forward of a 32-token block is bound by kernel launches (~29 ms, 2.3 s of CPU
# against 0.55 s of GPU time over 64 steps on an H200), which hides what the caches save.
# Every registered LLaDA and Dream strategy runs (about 35 at 256 steps, Info-Gain's 8-way look-ahead the slowest),
# so the default is one length; GPU_DECODE_LENGTHS="256 1024" adds the long canvas.
# GPU_SKIP_DECODE=1 leaves it out (a call that checks training only: GPU_TESTS=tests/gpu/test_train_cuda.py).
if [ -z "${GPU_SKIP_DECODE:-}" ]; then
  timeout ${GPU_DECODE_TIMEOUT:-420} python3 benchmarks/gpu_decode.py --lengths ${GPU_DECODE_LENGTHS:-256} \
    --batch ${GPU_DECODE_BATCH:-16} 2>&1 | tee "$OUT/gpu_decode.log"
fi
# Tests run from a copy without the source folders so imports resolve to the installed package.
rm -rf /tmp/dare-gpu-tests && mkdir -p /tmp/dare-gpu-tests && cp -r tests benchmarks pyproject.toml /tmp/dare-gpu-tests/
(cd /tmp/dare-gpu-tests && timeout ${GPU_TEST_TIMEOUT:-300} python3 -m pytest -m gpu -s -q -p no:cacheprovider \
  ${GPU_TESTS:-tests/gpu}) 2>&1 | tee "$OUT/pytest_gpu.log"
exit "${PIPESTATUS[0]}"
