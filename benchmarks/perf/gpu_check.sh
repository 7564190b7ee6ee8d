#!/usr/bin/env bash
# The GPU checks, as one short script for a CUDA machine: the population-vs-solo equivalence
# tests with the populations on the GPU (issue 4) and Transformer-NFN on CUDA against the CPU
# (issue 11) and the counter-v1 draws and training on CUDA against the CPU (issue 36), then the
# generation benchmark with populations on the GPU (default workloads under both draw schemes, then
# large populations). Uses the machine's own python3 (PyTorch with CUDA) and the repository on
# PYTHONPATH (randomgen is not needed there: on CUDA the draws are tensor ops); MNIST must be under
# $NFNZOO_DATA (mnist/mnist.npz). Under 8 minutes in all (the timeouts sum to 470 s). Output: $OUT.
set -u
OUT=${OUT:-/tmp/nfnzoo-gpu-check}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export HF_HOME=$(mktemp -d)
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 | tee "$OUT/gpu.txt"
python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name())" 2>&1 | tee -a "$OUT/gpu.txt"
timeout 110 python3 -m pytest -q -p no:cacheprovider -k cuda tests/zoo/test_population.py \
    tests/zoo/test_transformer_population.py tests/zoo/test_device.py tests/nfn_models/test_transformer_nfn.py \
    tests/zoo/test_draws.py 2>&1 | tee "$OUT/tests.txt"
bench() { timeout "$1" python3 -m benchmarks.perf.generation --device cuda "${@:2}" 2>&1 | tee -a "$OUT/bench.txt"; }
bench 110
bench 40 --families inr --profile full --runs 16384 --population-size 16384
# issue 36's targets: counter-v1 populations of 1,024 CNNs and 512 Transformers (Transformer >= 30%
# of the fp32 matrix rate, CNN >= 10%); then the same Transformers with the per-member generators
bench 90 --families cnn --runs 1024 --population-size 1024 --rng counter-v1
bench 80 --families transformer --runs 512 --population-size 512 --rng counter-v1
bench 40 --families transformer --runs 512 --population-size 256 --rng torch-generator
