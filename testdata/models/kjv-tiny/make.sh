#!/bin/sh
# Rebuilds this model from scratch: the King James Bible from Debian's
# bible-kjv package (public domain), a byte-level BPE tokenizer learned on
# it, and a Llama-shaped model trained on it by gozoo train.
#
#   apt-get install bible-kjv        # as root, after apt-get update
#   sh testdata/models/kjv-tiny/make.sh [OUT_DIR] [STOP_AT]
#
# Run from the repository root. The defaults rebuild the bundled model in
# place (about 30 minutes on 2 cores); give an OUT_DIR to keep it. STOP_AT
# ends the run after that many of the 1000 steps, on the same schedule, so
# that its losses can be read against train.log's (.ci/kjv-recipe does).
# The loss lines go to OUT_DIR/train.log as well as to stdout.
set -eu
out=${1:-testdata/models/kjv-tiny}
stop=${2:-0}
here=$(dirname "$0")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# One verse per line, without chapter headings or verse numbers: bible
# prints "Genesis 1", then "  1 In the beginning ..." with verses wrapped
# at 80 columns.
bible "Gen1:1-Rev22:21" </dev/null | awk '
/^[A-Z0-9][A-Za-z ]* [0-9]+$/ { next }
/^$/ { next }
/^  *[0-9]+ / { if (v != "") print v; sub(/^ *[0-9]+ /, ""); v = $0; next }
{ v = v " " $0 }
END { if (v != "") print v }' >"$work/kjv.txt"

go run ./cmd/gozoo train-tokenizer --data "$work/kjv.txt" --vocab 4096 --out "$work/tok"
cp "$here/config.json" "$work/config.json"
mkdir -p "$out"
go run ./cmd/gozoo train --config "$work/config.json" --data "$work/kjv.txt" --tokenizer "$work/tok" \
	--steps 1000 --stop-at "$stop" --batch 16 --seq-len 128 --lr 2e-3 --min-lr 2e-4 --warmup 100 --weight-decay 0.1 \
	--seed 1 --log-every 25 --save-dtype bf16 --save-optimizer=false --out "$out" | tee "$work/train.log"
mv "$work/train.log" "$out/train.log"
