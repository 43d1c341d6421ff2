#!/usr/bin/env bash
# Builds, here, everything the device check runs on the lent GPU machine
# (which has no Go), and prints the one device command that runs it there.
#
# usage: cuda/devicecheck.sh [--dry-run | --print-command]
#   (none)           build, then print the device command and how to call
#                    the device tool with it
#   --dry-run        build and print the device command only
#   --print-command  print the device command only, building nothing
#
# It builds, pure Go (CGO_ENABLED=0, -trimpath, stripped), into the ignored
# folder .devcheck/: gozoo (./cmd/gozoo) and `go test -c` binaries of
# ./cuda, ./layers, ./graphs and every other package with a TestCUDA test,
# packed as .devcheck/devcheck.tar.xz with a manifest. The device command
# is `bash cuda/devicerun.sh`, which runs the check from the working tree
# with that file carried; the working tree that travels, carried file
# included, must stay within the device tool's 64 MiB.
set -euo pipefail
cd "$(dirname "$0")/.."

COMMAND='bash cuda/devicerun.sh'
CARRY=.devcheck/devcheck.tar.xz
TIMEOUT_S=480 # the run bounds itself to DEVCHECK_BUDGET_S (420 s) plus its summary
LIMIT=$((64 << 20))

mode=build
case ${1:-} in
--print-command)
	echo "$COMMAND"
	exit 0
	;;
--dry-run) mode=dry ;;
"") ;;
*)
	sed -n '5,9p' "$0" >&2
	exit 2
	;;
esac

DC=.devcheck
STAGE=$DC/stage
rm -rf "$STAGE" "$DC/out"
mkdir -p "$STAGE/bin"
export CGO_ENABLED=0
flags=(-trimpath "-ldflags=-s -w")

echo "building gozoo"
go build "${flags[@]}" -o "$STAGE/bin/gozoo" ./cmd/gozoo

pkgs=(cuda layers graphs)
while IFS= read -r d; do
	d=${d#./}
	[[ " ${pkgs[*]} " == *" $d "* ]] || pkgs+=("$d")
done < <(grep -rl --include='*_test.go' -E '^func TestCUDA' . 2>/dev/null | grep -v '^\./\.' | xargs -r -n1 dirname | sort -u)

: >"$STAGE/TESTS.tsv"
for p in "${pkgs[@]}"; do
	name=$(echo "$p" | tr / _).test
	echo "building $name (./$p)"
	go test -c "${flags[@]}" -o "$STAGE/bin/$name" "./$p"
	if [[ -f $STAGE/bin/$name ]]; then
		printf '%s\t%s\n' "$name" "$p" >>"$STAGE/TESTS.tsv"
	else
		echo "  ./$p has no test files"
	fi
done
[[ -f $STAGE/bin/graphs.test ]] || {
	echo "no graphs.test: the device run expands the fixtures with it" >&2
	exit 1
}

commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
dirty=no
[[ -n $(git status --porcelain --untracked-files=no 2>/dev/null) ]] && dirty=yes
{
	printf 'commit\t%s\n' "$commit"
	printf 'dirty\t%s\n' "$dirty"
	printf 'go\t%s\n' "$(go env GOVERSION)"
	printf 'built_at\t%s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
	printf 'tests\t%s\n' "$(cut -f1 "$STAGE/TESTS.tsv" | tr '\n' ' ')"
} >"$STAGE/MANIFEST.tsv"

raw=$(du -cb "$STAGE"/bin/* | tail -1 | cut -f1)
echo "compressing $((raw >> 20)) MiB of binaries (xz -9)"
tar -C "$STAGE" -cf - bin MANIFEST.tsv TESTS.tsv | xz -9 -T0 >"$CARRY.tmp"
mv "$CARRY.tmp" "$CARRY"
rm -rf "$STAGE"

# What travels: tracked files, untracked files git does not ignore, and the
# carried file.
tracked=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
untracked=$(git ls-files -z --others --exclude-standard | xargs -0 -r du -cb 2>/dev/null | tail -1 | cut -f1)
carried=$(stat -c %s "$CARRY")
total=$((tracked + ${untracked:-0} + carried))
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
echo
echo "carried: $CARRY, $(mib "$carried") (binaries $(mib "$raw") before xz)"
echo "travels: $(mib "$total") of 64 MiB (tracked $(mib "$tracked"), untracked $(mib "${untracked:-0}"), carried $(mib "$carried"))"
if ((total > LIMIT)); then
	echo "over the device tool's 64 MiB: the call would be refused" >&2
	exit 1
fi
echo
echo "device command (${#COMMAND} characters):"
echo "$COMMAND"
if [[ $mode == build ]]; then
	cat <<EOF

Call the device tool (the session does; this script cannot) with:
  run  command: $COMMAND
       carry:   ["$CARRY"]
       timeout_s: $TIMEOUT_S
Results come back as devicecheck.json and devicecheck.log (from \$OUT); the
summary table ends the output. A second, shorter call can run some parts
only, e.g. 'DEVCHECK_BUDGET_S=240 bash cuda/devicerun.sh golden bench'.
Call give_back unless you run again at once.
EOF
fi
