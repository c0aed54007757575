#!/usr/bin/env bash
# The README's GPU figures (docs/data/gpu.json): `onyxia bench --batch 1,8`, a 1,024-token Qwen3; with `tests`
# the LLM equality tests, with `ops` the operator suite, with `probe` tools/wgsl_semantics_probe.py; on a lent
# GPU machine that has no Onyxia installed and no network, only its image's python3 (numpy, onnx,
# onnxruntime, tokenizers, jinja2, rich, pytest, pytest-xdist) and an NVIDIA driver with its Vulkan ICD.
# The working tree that travels has a size limit (64 MiB): leave out what a mode does not read.
#
# Prepare on a machine with network, in the repo root (both folders are git-ignored):
#   apt-get download libvulkan1 (into .gl/: the Vulkan loader the image lacks)
#   pip download --no-deps --python-version 3.12 wgpu==0.32.0 rendercanvas cffi pycparser (into .whl/), and the
#   pinned onnxruntime (the tests' oracle; the image's older one refuses or crashes on some test models)
#   and llguidance's installed folders copied from .venv (into .whl/pkgs/; abi3, so it loads on 3.12)
# Then on the GPU machine, carrying .gl and .whl:  bash tools/device_bench.sh bench|tests|ops|probe OUT_DIR
set -uo pipefail
mode=${1:?bench, tests, ops or probe}
out=${2:?output folder}
mkdir -p "$out"
for deb in .gl/*.deb; do dpkg -x "$deb" /; done
ldconfig
if [ ! -d /tmp/site/wgpu ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
    [ -d .whl/pkgs ] && cp -r .whl/pkgs/. /tmp/site/  # installed packages no index had for Python 3.12 (llguidance)
fi
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f "$icd" ] && export VK_DRIVER_FILES=$icd
src=$(ls -d "$PWD"/packages/*/src | tr '\n' ':')
export PYTHONPATH=/tmp/site:$src PYTHONUNBUFFERED=1 ONYXIA_CACHE_DIR=/tmp/onyxia-cache ONYXIA_BACKEND=vulkan
mkdir -p /tmp/bin  # the `onyxia` command as pip would write it (timeout runs programs, not functions)
printf '#!/bin/sh\nexec python3 -c "import sys; from onyxia.cli.main import main; sys.argv[0] = \\"onyxia\\"; sys.exit(main())" "$@"\n' >/tmp/bin/onyxia
chmod +x /tmp/bin/onyxia
export PATH=/tmp/bin:$PATH

case $mode in
bench)
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/gpu.txt"
    python3 -c 'import wgpu; a = wgpu.gpu.request_adapter_sync(power_preference="high-performance"); print(a.info)' \
        | tee -a "$out/gpu.txt" || exit 1
    archs=" ${ARCHS:-gemma3 qwen2 qwen3} "  # ARCHS="gemma3" for a shorter run
    [[ $archs == *" gemma3 "* ]] && timeout 200 onyxia bench --arch gemma3 --size full --precision both \
        --engines onyxia,ort-cpu --batch 1,8 --profile --json "$out/gemma3.json" --record "$out/bench-gpu.json" \
        2>&1 | tee "$out/gemma3.log"
    [[ $archs == *" qwen2 "* ]] && timeout 120 onyxia bench --arch qwen2 --size full --precision q4 \
        --engines onyxia,ort-cpu --batch 1,8 --json "$out/qwen2.json" --record "$out/bench-gpu.json" \
        2>&1 | tee "$out/qwen2.log"
    [[ $archs == *" qwen3 "* ]] && timeout 100 onyxia bench --arch qwen3 --size full --precision q4 \
        --engines onyxia,ort-cpu --prompt-tokens 1024 --decode-tokens 32 --json "$out/qwen3-1024.json" \
        --record "$out/bench-gpu.json" 2>&1 | tee "$out/qwen3.log"
    true  # an arch left out of ARCHS is not a failure
    ;;
tests)
    # Token equality with onnxruntime for every fixture layout, batched streams equal to solo ones.
    timeout "${TESTS_TIMEOUT:-240}" python3 -m pytest --import-mode=importlib -p no:cacheprovider -q -x -n 8 \
        packages/onyxia-cli/tests/test_llm_fixtures.py packages/onyxia-cli/tests/test_llm_batch.py \
        packages/onyxia-cli/tests/test_llm_families.py 2>&1 | tee "$out/tests.log"
    ;;
ops)
    # Every operator family against onnxruntime on this adapter's kernel variants.
    timeout "${TESTS_TIMEOUT:-300}" python3 -m pytest --import-mode=importlib -p no:cacheprovider -q -rf -n 16 \
        packages/onyxia-operators/tests packages/onyxia-runtime/tests 2>&1 | tee "$out/ops.log"
    ;;
probe)
    # How this adapter evaluates the WGSL expressions adapters may differ on (compare with lavapipe's output).
    python3 tools/wgsl_semantics_probe.py 2>&1 | tee "$out/probe.log"
    ;;
*) echo "unknown mode $mode: bench, tests, ops or probe" >&2; exit 2 ;;
esac
