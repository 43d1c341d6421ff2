#!/usr/bin/env bash
# Installs what the notebooks need and registers the GoNB kernel in a
# project-local Jupyter data directory (notebooks/.jupyter), so nothing is
# written to ~/.local/share/jupyter:
#
#   - Jupyter's headless runner and graphviz from Debian (apt-get, as root;
#     skipped when they are already there; no PyPI);
#   - GoNB and goimports at the versions pinned in notebooks/tools/go.mod
#     (Go 1.24+ tool directives; `go install pkg@version` cannot be used
#     because the module proxy refuses GoNB's @v/list), into notebooks/.bin.
#     goimports is required by GoNB at run time; gopls is not (it only
#     serves autocompletion), so it is not installed.
#
# Idempotent: run it again to repair an install. Facts behind it:
# ../shared/notes/notebooks.md.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

apt_pkgs=(jupyter-nbconvert python3-nbclient jupyter-client graphviz)
missing=()
for p in "${apt_pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
	echo "setup: apt-get install ${missing[*]}"
	sudo=()
	[[ $(id -u) == 0 ]] || sudo=(sudo)
	"${sudo[@]}" apt-get update -qq
	DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${apt_pkgs[@]}" >/dev/null
fi

bin="$here/.bin"
echo "setup: go install tool (gonb, goimports) -> $bin"
(cd "$here/tools" && GOBIN="$bin" go install tool)

export JUPYTER_DATA_DIR="$here/.jupyter"
export PATH="$bin:$PATH"
# --force_deps: install without gopls. --raw_error: errors as plain text,
# which is what a headless run shows.
if ! out="$(gonb --install --force_deps --raw_error 2>&1)"; then
	echo "$out" >&2
	exit 1
fi
kernel="$JUPYTER_DATA_DIR/kernels/gonb/kernel.json"
# The kernel finds goimports (and go) on its PATH: pin it in the kernelspec,
# so the kernel works from any Jupyter started with this JUPYTER_DATA_DIR.
/usr/bin/python3 - "$kernel" "$bin:$(go env GOROOT)/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" <<'EOF'
import json, sys
path, p = sys.argv[1], sys.argv[2]
spec = json.load(open(path))
spec.setdefault("env", {})["PATH"] = p
json.dump(spec, open(path, "w"), indent=1)
EOF
echo "setup: kernel gonb registered in $kernel"
