#!/usr/bin/env bash
# Executes the notebooks headless with Debian's nbconvert and the GoNB
# kernel that setup.sh registered, and checks what they drew:
#
#   notebooks/run.sh                  # every notebooks/*.ipynb
#   notebooks/run.sh inside.ipynb     # some of them
#   NOTEBOOKS_OUT=dir notebooks/run.sh   # keep the executed copies and their
#                                        # pictures (dir/<name>-<k>.png)
#
# Each notebook runs in a fresh kernel (execute.py: Debian's nbclient, what
# `jupyter nbconvert --execute` runs, keeping the executed copy and showing
# the failing cell). A notebook fails when a cell fails (compile error,
# panic, non-zero exit), when its setup cell pins another GoNB than
# notebooks/tools/go.mod, or when it does not produce exactly the number of
# pictures its metadata names ("gozoo": {"images": N}). Exit status 1 if
# any failed.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export JUPYTER_DATA_DIR="$here/.jupyter"
export PATH="$here/.bin:$PATH"
if [[ ! -f $JUPYTER_DATA_DIR/kernels/gonb/kernel.json ]] || ! /usr/bin/python3 -c 'import nbconvert, nbclient' 2>/dev/null; then
	echo "run.sh: Jupyter or the GoNB kernel is missing: run notebooks/setup.sh first" >&2
	exit 1
fi

# The notebooks read testdata/models/qwen3-tiny, whose weights are written
# rather than stored (internal/testmodels).
(cd "$here/.." && go run ./internal/testmodels/prepare)

out="${NOTEBOOKS_OUT:-}"
keep=""
if [[ -z $out ]]; then
	keep=" (removed at exit: set NOTEBOOKS_OUT=dir to keep it)"
	out="$(mktemp -d)"
	trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out"

if (($#)); then
	notebooks=()
	for nb in "$@"; do
		[[ -f $here/$nb ]] && nb="$here/$nb"
		notebooks+=("$nb")
	done
else
	notebooks=("$here"/*.ipynb)
fi
[[ -f ${notebooks[0]} ]] || { echo "run.sh: no notebooks" >&2; exit 1; }

gonb="$(awk '$1 == "github.com/janpfeifer/gonb" { print $2 }' "$here/tools/go.mod")"
start_all=$SECONDS
# Two notebooks at a time (NOTEBOOKS_JOBS): a kernel keeps about one core
# busy, compiling and running its cells.
jobs_max="${NOTEBOOKS_JOBS:-2}"
run_one() {
	local nb=$1 name start=$SECONDS report
	name="$(basename "$nb" .ipynb)"
	if ! grep -q "github.com/janpfeifer/gonb@$gonb" "$nb"; then
		echo "FAIL $name: its setup cell must pin github.com/janpfeifer/gonb@$gonb, the kernel's version (notebooks/tools/go.mod)"
		return 1
	fi
	# The kernel's own log lines (klog: I/W/E and a date) go to the log.
	if report="$(/usr/bin/python3 "$here/execute.py" "$nb" "$out" 2>"$out/$name.log")"; then
		echo "PASS $name ($((SECONDS - start)) s)"
		echo "$report"
		return 0
	fi
	echo "FAIL $name ($((SECONDS - start)) s); kernel log: $out/$name.log$keep"
	echo "$report"
	return 1
}
pids=()
for nb in "${notebooks[@]}"; do
	while (($(jobs -rp | wc -l) >= jobs_max)); do
		wait -n || true
	done
	run_one "$nb" >"$out/$(basename "$nb" .ipynb).result" 2>&1 &
	pids+=($!)
done
passed=0 failed=0
for i in "${!notebooks[@]}"; do
	if wait "${pids[$i]}"; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
	fi
	cat "$out/$(basename "${notebooks[$i]}" .ipynb).result"
done
echo "notebooks: $passed passed, $failed failed ($((SECONDS - start_all)) s)"
((failed == 0))
