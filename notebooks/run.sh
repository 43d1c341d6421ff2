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
passed=0 failed=0
for nb in "${notebooks[@]}"; do
	name="$(basename "$nb" .ipynb)"
	start=$SECONDS
	if ! grep -q "github.com/janpfeifer/gonb@$gonb" "$nb"; then
		echo "FAIL $name: its setup cell must pin github.com/janpfeifer/gonb@$gonb, the kernel's version (notebooks/tools/go.mod)"
		failed=$((failed + 1))
		continue
	fi
	# The kernel's own log lines (klog: I/W/E and a date) go to the log.
	if report="$(/usr/bin/python3 "$here/execute.py" "$nb" "$out" 2>"$out/$name.log")"; then
		echo "PASS $name ($((SECONDS - start)) s)"
		passed=$((passed + 1))
	else
		echo "FAIL $name ($((SECONDS - start)) s); kernel log: $out/$name.log$keep"
		failed=$((failed + 1))
	fi
	echo "$report"
done
echo "notebooks: $passed passed, $failed failed ($((SECONDS - start_all)) s)"
((failed == 0))
