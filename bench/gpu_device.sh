#!/usr/bin/env bash
# bench/gpu_generate.py on the device machine, in one call. Prepare here with
# `bash bench/gpu_wheels.sh`, then call the device tool's run with
#     command: bash bench/gpu_device.sh ip2p flux-kontext     carry: [".whl"]   timeout_s: 420
# and at once, on the machine still warm, the same with qwen-image-edit (timeout_s: 270). With
# a machine's start (1-2 minutes) that is about 13 of a session's 15 minutes of device time.
#
# Installs the carried wheels into /tmp/site (the image's own torch stays), checks the imports,
# then runs each model named (default: all three) under its own time limit, so that a model
# that runs out of time still leaves the ones before it. Writes under $OUT: gpu.txt (the GPU,
# driver, packages), log.txt (everything printed) and MODEL.json (bench/gpu_generate.py --json)
# for each model that finished.
#
# `bash bench/gpu_device.sh --smoke [MODEL...]` checks the same steps on a machine without a GPU
# (the wheels need a Python 3.12 there, as on the device; PYVER=3.11 bash bench/gpu_wheels.sh
# fetches them for 3.11) and runs bench/gpu_generate.py's CPU smoke version.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/gpu-generate-out}
mkdir -p "$out"
smoke=()
if [ "${1:-}" = --smoke ]; then smoke=(--smoke); shift; fi
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(ip2p flux-kontext qwen-image-edit)
# Seconds per model (estimates for an H200, not measured: the imports, two builds, compiling
# the repeated blocks, the warm-ups and the three timed modes).
declare -A limit=([ip2p]=150 [flux-kontext]=240 [qwen-image-edit]=240)
log="$out/log.txt"
ls .whl/*.whl >/dev/null 2>&1 || { echo "no wheels in .whl: run bash bench/gpu_wheels.sh here and carry .whl" | tee -a "$log"; exit 2; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl 2>&1 | tee -a "$log" || exit 3
export PYTHONPATH="$PWD/src:$PWD/bench:/tmp/site" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv \
  >"$out/gpu.txt" 2>&1
python3 -c 'import sys, torch, diffusers, transformers, pydantic, medibench.runs
print(sys.version.split()[0], "torch", torch.__version__, "diffusers", diffusers.__version__,
      "transformers", transformers.__version__, "pydantic", pydantic.__version__,
      "cuda", torch.cuda.is_available())' >>"$out/gpu.txt" 2>&1 || {
  cat "$out/gpu.txt" | tee -a "$log"; echo "the imports failed: see above" | tee -a "$log"; exit 4
}
tee -a "$log" <"$out/gpu.txt"
if [ ${#smoke[@]} -eq 0 ] && ! grep -q "cuda True" "$out/gpu.txt"; then
  echo "torch sees no CUDA GPU here (--smoke runs the CPU version)" | tee -a "$log"; exit 5
fi
status=0
for model in "${models[@]}"; do
  secs=${limit[$model]:-300}
  echo "== $model (at most $secs s) $(date -u +%H:%M:%S)" | tee -a "$log"
  timeout "$secs" python3 bench/gpu_generate.py "${smoke[@]}" --models "$model" --json "$out/$model.json" \
    2>&1 | grep -v -e "should be kept in float32" -e "requires torchvision" | tee -a "$log"
  rc=${PIPESTATUS[0]}
  [ "$rc" -eq 0 ] || { echo "== $model stopped: exit $rc (124: out of time)" | tee -a "$log"; status=$rc; }
done
exit $status
