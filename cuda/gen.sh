#!/bin/sh
# Compiles kernels/*.cu to ptx/*.ptx.zst for compute_80 (go generate ./cuda).
# Needs nvcc (Debian: nvidia-cuda-toolkit, from non-free) and zstd; the
# output is checked in, so building gozoo does not. PTX_DIR writes
# elsewhere (the reproducibility test).
set -e
cd "$(dirname "$0")"
NVCC=${NVCC:-nvcc}
out=${PTX_DIR:-ptx}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for cu in kernels/*.cu; do
	name=$(basename "$cu" .cu)
	"$NVCC" -ptx -arch=compute_80 -O3 -std=c++17 -o "$tmp/$name.ptx" "$cu"
	zstd -19 -q -f -o "$out/$name.ptx.zst" "$tmp/$name.ptx"
done
