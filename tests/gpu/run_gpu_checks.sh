#!/usr/bin/env bash
# GPU checks for a CUDA machine with PyTorch preinstalled: installs dare (no deps) plus any wheels
# carried in .whl/, runs tests/gpu and the decode benchmark on CUDA. Writes logs under $OUT if set.
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
# Tests run from a copy without the source folders so imports resolve to the installed package.
rm -rf /tmp/dare-gpu-tests && mkdir -p /tmp/dare-gpu-tests && cp -r tests pyproject.toml /tmp/dare-gpu-tests/
(cd /tmp/dare-gpu-tests && timeout 300 python3 -m pytest -m gpu -s -q tests/gpu) 2>&1 | tee "$OUT/pytest_gpu.log"
status=${PIPESTATUS[0]}
timeout 120 python3 benchmarks/decode_speed.py --device cuda --gen-length 256 --batch 16 2>&1 | tee "$OUT/decode_speed_cuda.log"
exit "$status"
