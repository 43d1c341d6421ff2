#!/bin/sh
# Compiles kernels/*.cu to ptx/*.ptx for compute_80 (go generate ./cuda).
# Needs nvcc (Debian: nvidia-cuda-toolkit, from non-free); the output is
# checked in, so building gozoo does not.
set -e
cd "$(dirname "$0")"
NVCC=${NVCC:-nvcc}
for cu in kernels/*.cu; do
	name=$(basename "$cu" .cu)
	"$NVCC" -ptx -arch=compute_80 -O3 -std=c++17 -o "ptx/$name.ptx" "$cu"
done
