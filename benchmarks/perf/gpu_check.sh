#!/usr/bin/env bash
# The GPU checks, as one short script for a CUDA machine: the population-vs-solo equivalence
# tests with the populations on the GPU (issue 4) and Transformer-NFN on CUDA against the CPU
# (issue 11), then the generation benchmark with populations on the GPU (default workloads, then
# larger INR and Transformer populations). Uses the machine's own python3 (PyTorch with CUDA) and the
# repository on PYTHONPATH; MNIST must be under $NFNZOO_DATA (mnist/mnist.npz). Output: $OUT.
set -u
OUT=${OUT:-/tmp/nfnzoo-gpu-check}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export HF_HOME=$(mktemp -d)
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 | tee "$OUT/gpu.txt"
python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name())" 2>&1 | tee -a "$OUT/gpu.txt"
timeout 120 python3 -m pytest -q -p no:cacheprovider -k cuda tests/zoo/test_population.py \
    tests/zoo/test_transformer_population.py tests/zoo/test_device.py tests/nfn_models/test_transformer_nfn.py \
    2>&1 | tee "$OUT/tests.txt"
bench() { timeout "$1" python3 -m benchmarks.perf.generation --device cuda "${@:2}" 2>&1 | tee -a "$OUT/bench.txt"; }
bench 150
bench 60 --families inr --profile full --runs 16384 --population-size 16384
bench 90 --families transformer --runs 512 --population-size 256
