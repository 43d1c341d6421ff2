#!/usr/bin/env bash
# The device check, run ON the lent GPU machine (as root, $OUT set) by the
# one command cuda/devicecheck.sh prints; it needs nothing but what travels:
# the working tree and .devcheck/devcheck.tar.xz (the carried binaries that
# devicecheck.sh built here: gozoo and the `go test -c` binaries of the
# packages with CUDA tests). That machine has no Go.
#
# usage: bash cuda/devicerun.sh [PART...]
#   PARTs: tests golden models bench torch (default: all of them; bench and
#   torch bring models along). DEVCHECK_BUDGET_S (default 420) bounds the
#   whole run in seconds: every step has its own timeout, cut to what is
#   left, a step that would get under 10 s is skipped, and a failing step
#   does not stop the others.
#
# Phase A, in parallel (correctness; CPU work): the CUDA tests of every
# test binary (-test.run CUDA), `gozoo golden --device cuda` over every case
# of testdata/golden and testdata/gguf (batch 1 and 8; --fast on the GGUF
# cases and the CPU run of every case, for information), and `gozoo
# random` of Qwen3-0.6B and SmolLM2-135M (BF16) with `gozoo quantize` to
# Q4_K_M. Phase B, one at a time (speed): `gozoo bench --device cuda` at
# batch 1 (512-token prompt, 128 new tokens) and 64 (128-token prompts, 64
# steps), BF16 and Q4_K_M, and cuda/torch_bench.py on the same checkpoints
# (BF16, eager and SDPA).
#
# Results: $OUT/devicecheck.json (cuda/devicecheck_summary.py: correctness
# counts, the speed table with ratios gozoo/torch, the bandwidth fraction,
# the device) and $OUT/devicecheck.log (every step's output).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-$ROOT/.devcheck/out}
W=${DEVCHECK_WORK:-/tmp/devcheck}
BUDGET=${DEVCHECK_BUDGET_S:-420}
START=$(date +%s)
DEADLINE=$((START + BUDGET - 15)) # 15 s kept for the summary
PHASE_A_END=$((START + BUDGET * 45 / 100))
PARTS=" ${*:-tests golden models bench torch} "
case $PARTS in *" models "*) ;; *" bench "* | *" torch "*) PARTS+="models " ;; esac
want() { [[ $PARTS == *" $1 "* ]]; }

mkdir -p "$OUT"
rm -rf "$W"
mkdir -p "$W/logs" "$W/models"
LOG=$OUT/devicecheck.log
: >"$LOG"
: >"$W/steps.jsonl"
: >"$W/meta.tsv"
say() { printf '[%3ds] %s\n' $(($(date +%s) - START)) "$*" | tee -a "$LOG"; }
meta() { printf '%s\t%s\n' "$1" "$2" >>"$W/meta.tsv"; }

# record NAME KIND STATUS RC SECONDS LOG [RESULT]
record() {
	local extra=""
	[[ -n ${7:-} ]] && extra=",\"result\":\"$7\""
	printf '{"name":"%s","kind":"%s","status":"%s","rc":%s,"seconds":%s,"log":"%s"%s}\n' \
		"$1" "$2" "$3" "${4:-null}" "$5" "$6" "$extra" >>"$W/steps.jsonl"
}

# run_step NAME KIND DIR TIMEOUT CMD...: runs CMD in DIR under timeout (cut
# to the deadline: STEP_END, else DEADLINE), its output to its own log.
run_step() {
	local name=$1 kind=$2 dir=$3 tmo=$4
	shift 4
	local log=$W/logs/$name.log end=${STEP_END:-$DEADLINE} left t0 rc status secs
	left=$((end - $(date +%s)))
	((tmo > left)) && tmo=$left
	if ((tmo < 10)); then
		record "$name" "$kind" skipped "" 0 "$log" "${RESULT:-}"
		say "skip  $name (out of time)"
		return 0
	fi
	t0=$(date +%s%N)
	(cd "$dir" && exec timeout -k 10 "$tmo" "$@") >"$log" 2>&1 </dev/null
	rc=$?
	secs=$(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')
	case $rc in 0) status=ok ;; 124 | 137) status=timeout ;; *) status=fail ;; esac
	record "$name" "$kind" "$status" "$rc" "$secs" "$log" "${RESULT:-}"
	say "$(printf '%-7s %-34s rc=%-3s %6ss (limit %ss)' "$status" "$name" "$rc" "$secs" "$tmo")"
}

# skip_step NAME KIND WHY
skip_step() {
	record "$1" "$2" skipped "" 0 "$W/logs/$1.log"
	echo "$3" >"$W/logs/$1.log"
	say "skip  $1 ($3)"
}

finish() {
	trap - EXIT INT TERM
	meta elapsed_s $(($(date +%s) - START))
	{
		echo
		echo "===== step logs ====="
		for f in "$W"/logs/*.log; do
			[[ -f $f ]] || continue
			echo
			echo "===== $(basename "$f" .log) ====="
			if (($(stat -c %s "$f") > 1500000)); then
				head -c 700000 "$f"
				echo
				echo "..... (cut: $(stat -c %s "$f") bytes) ....."
				tail -c 700000 "$f"
			else
				cat "$f"
			fi
		done
		echo
	} >>"$LOG"
	python3 cuda/devicecheck_summary.py --work "$W" --meta "$W/meta.tsv" --out "$OUT/devicecheck.json" 2>&1 | tee -a "$LOG"
}
trap finish EXIT
trap 'exit 143' INT TERM

say "device check: parts${PARTS% }, budget ${BUDGET}s, out $OUT"
meta budget_s "$BUDGET"
meta parts "$(echo $PARTS)"

# The binaries.
if [[ ! -f .devcheck/devcheck.tar.xz ]]; then
	say "no .devcheck/devcheck.tar.xz: build it with cuda/devicecheck.sh and carry .devcheck"
	exit 1
fi
mkdir -p "$W/bin"
if ! xz -dc -T0 .devcheck/devcheck.tar.xz 2>/dev/null | tar -x -C "$W"; then
	python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2])' .devcheck/devcheck.tar.xz "$W" ||
		{ say "cannot unpack .devcheck/devcheck.tar.xz"; exit 1; }
fi
chmod +x "$W"/bin/* 2>/dev/null
GOZOO=$W/bin/gozoo
while IFS=$'\t' read -r k v; do meta "build_$k" "$v"; done <"$W/MANIFEST.tsv"
say "built: $(tr '\t\n' '= ' <"$W/MANIFEST.tsv")"

# The machine.
{
	echo "===== machine ====="
	uname -a
	nvidia-smi 2>&1
	command -v nvcc >/dev/null && nvcc --version | tail -2
	ldconfig -p 2>/dev/null | grep -E 'libcuda\.so|libcublas' || true
	env | grep -E '^(LD_LIBRARY_PATH|CUDA[A-Z_]*|NVIDIA[A-Z_]*|PATH)=' || true
} >>"$LOG" 2>&1
meta device "$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
meta driver "$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)"
meta device_memory "$(nvidia-smi --query-gpu=memory.total --format=csv,noheader 2>/dev/null | head -1)"
meta libcuda "$(ldconfig -p 2>/dev/null | grep -m1 -o '/.*libcuda\.so\.1$')"

# libcuda is found in the usual places. cuBLAS may only be in a pip wheel
# (nvidia-cublas, the one PyTorch uses): point GOZOO_CUDA_LIBS at it, and
# LD_LIBRARY_PATH for the Go processes, so libcublasLt resolves beside it.
unset GOZOO_CUDA_LIBS
ORIG_LDP=${LD_LIBRARY_PATH:-}
cublas_dir=""
for d in /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/nvidia/lib64; do
	if compgen -G "$d/libcublas.so.1[123]" >/dev/null; then cublas_dir=$d; break; fi
done
if [[ -z $cublas_dir ]]; then # the loader's cache: a bare name finds it
	f=$(ldconfig -p 2>/dev/null | grep -o '/[^ ]*/libcublas\.so\.1[123]$' | head -1)
	[[ -n $f ]] && cublas_dir=$(dirname "$f")
fi
if [[ -z $cublas_dir ]]; then
	for sp in $(python3 -c 'import site, sys; print(" ".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null) /usr/local/cuda* /opt; do
		[[ -d $sp ]] || continue
		f=$(find "$sp" -name 'libcublas.so.1[123]' 2>/dev/null | sort -r | head -1)
		if [[ -n $f ]]; then
			cublas_dir=$(dirname "$f")
			export GOZOO_CUDA_LIBS=$cublas_dir
			break
		fi
	done
fi
meta cublas_dir "$cublas_dir"
meta gozoo_cuda_libs "${GOZOO_CUDA_LIBS:-}"
say "cuBLAS: ${cublas_dir:-not found} (GOZOO_CUDA_LIBS=${GOZOO_CUDA_LIBS:-unset})"
GO_LDP=$ORIG_LDP
[[ -n ${GOZOO_CUDA_LIBS:-} ]] && GO_LDP=$GOZOO_CUDA_LIBS${ORIG_LDP:+:$ORIG_LDP}
export LD_LIBRARY_PATH=$GO_LDP

# The fixtures: testdata's large files are tracked compressed; the graphs
# test binary's TestMain expands them (internal/testmodels), zstd if not.
if want golden || want tests; then
	if [[ -x $W/bin/graphs.test ]]; then
		STEP_END=$PHASE_A_END run_step fixtures setup graphs 60 "$W/bin/graphs.test" -test.run '^$'
	fi
	if ! compgen -G 'testdata/golden/*/model.safetensors' >/dev/null && command -v zstd >/dev/null; then
		find testdata -name '*.zst' -exec sh -c 'zstd -q -d -f "$1" -o "${1%.zst}"' _ {} \;
	fi
fi

cases=()
for d in testdata/golden/*/ testdata/gguf/*/; do [[ -d $d ]] && cases+=("${d%/}"); done
ggufs=()
for d in testdata/gguf/*/; do [[ -d $d ]] && ggufs+=("${d%/}"); done

# Phase A.
say "phase A: tests, golden, models (until +$((PHASE_A_END - START))s)"
export STEP_END=$PHASE_A_END
if want tests; then
	while IFS=$'\t' read -r bin pkg; do
		[[ -x $W/bin/$bin && -d $pkg ]] || { skip_step "test.${bin%.test}" gotest "no binary $bin or folder $pkg"; continue; }
		run_step "test.${bin%.test}" gotest "$pkg" 200 "$W/bin/$bin" -test.run CUDA -test.v -test.count 1 -test.timeout 190s &
	done <"$W/TESTS.tsv"
fi
if want golden; then
	run_step golden.b1 golden . 150 "$GOZOO" golden --device cuda "${cases[@]}" &
	run_step golden.b8 golden . 150 "$GOZOO" golden --device cuda --batch 8 "${cases[@]}" &
	run_step golden.fast golden-info . 120 "$GOZOO" golden --device cuda --fast "${ggufs[@]}" &
	run_step golden.cpu golden-info . 120 "$GOZOO" golden "${cases[@]}" &
fi
declare -A CONFIG=([qwen3-0.6b]=cuda/devicecheck/configs/Qwen3-0.6B.json [smollm2-135m]=cuda/devicecheck/configs/SmolLM2-135M.json)
MODEL_NAMES=(qwen3-0.6b smollm2-135m)
if want models; then
	for m in "${MODEL_NAMES[@]}"; do
		(
			run_step "random.$m" setup . 90 "$GOZOO" random --config "${CONFIG[$m]}" --out "$W/models/$m" --dtype bf16 --seed 1
			if [[ -f $W/models/$m/model.safetensors ]]; then
				run_step "quantize.$m" setup . 150 "$GOZOO" quantize --model "$W/models/$m" --type q4_k_m --out "$W/models/$m-q4_k_m.gguf"
			else
				skip_step "quantize.$m" setup "no checkpoint"
			fi
		) &
	done
fi
wait
unset STEP_END

# Phase B: one at a time, so the timings do not share the card.
say "phase B: speed (until +$((DEADLINE - START))s)"
bench() { # MODEL WEIGHTS BATCH
	local m=$1 w=$2 b=$3 src args
	src=$W/models/$m
	[[ $w == q4_k_m ]] && src=$W/models/$m-q4_k_m.gguf
	if [[ ! -e $src ]]; then
		skip_step "bench.$m.$w.b$b" bench "no model $src"
		return
	fi
	if ((b == 1)); then
		args=(--prompt-tokens 512 --gen-tokens 128)
	else
		args=(--batch "$b" --prompt-tokens 128 --gen-tokens 64)
	fi
	run_step "bench.$m.$w.b$b" bench . 60 "$GOZOO" bench --device cuda --model "$src" "${args[@]}" --json
}
torchbench() { # MODEL [extra args]
	local m=$1
	shift
	if [[ ! -f $W/models/$m/model.safetensors ]]; then
		skip_step "torch.$m" torch "no checkpoint"
		return
	fi
	# Its own budget ends its later stages in time to write what it has.
	local left=$((DEADLINE - $(date +%s) - 30))
	((left > 100)) && left=100
	((left < 10)) && left=10
	RESULT=$W/torch.$m.json run_step "torch.$m" torch . 150 env LD_LIBRARY_PATH="$ORIG_LDP" PYTHONUNBUFFERED=1 \
		python3 cuda/torch_bench.py --model "$W/models/$m" --out "$W/torch.$m.json" --budget-s "$left" \
		--prompt-tokens 512 --gen-tokens 128 --batch 64 --batch-prompt-tokens 128 --batch-gen-tokens 64 "$@"
}
for m in "${MODEL_NAMES[@]}"; do
	if want bench; then
		bench "$m" bf16 1
		bench "$m" bf16 64
	fi
	if want torch; then
		if [[ $m == qwen3-0.6b ]]; then torchbench "$m" --copy-bw; else torchbench "$m"; fi
	fi
	if want bench; then
		bench "$m" q4_k_m 1
		bench "$m" q4_k_m 64
	fi
done
nvidia-smi --query-gpu=name,temperature.gpu,clocks.sm,clocks.mem,memory.used --format=csv >>"$LOG" 2>&1
say "done"
