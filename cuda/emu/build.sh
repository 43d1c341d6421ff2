#!/bin/sh
# Builds the CUDA emulator for kernels/attention.cu: sh build.sh OUT
# (default: $TMPDIR/gozoo-cuda-emu). Needs g++ 12 or later (_Float16).
set -e
cd "$(dirname "$0")"
out=${1:-${TMPDIR:-/tmp}/gozoo-cuda-emu}
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
# extern __shared__ arrays become file-scope arrays emu.cc defines; other
# __shared__ variables become static (one block runs at a time).
sed 's/extern __shared__/extern/' ../kernels/attention.cu >"$src/attention.cu"
${CXX:-g++} -O2 -std=c++17 -I. -I"$src" -include cuda_fp16.h -Wno-unknown-pragmas -x c++ emu.cc -o "$out"
echo "$out"
