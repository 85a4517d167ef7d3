#!/usr/bin/env bash
# An installation that has been moved (install_prefix.sh), used from a directory outside
# the source and build trees: hpctrain-data converts Fashion-MNIST, and the MLP trains for
# one epoch on 2 ranks with the example config from B/share/hpctrain/configs/. Also
# hpctrain init, --version and a Python tool (found relative to the program).
#   bash tests/install/train_outside.sh PREFIX SOURCE BUILD
set -euo pipefail
fail() { echo "FAIL: $*" >&2; exit 1; }
b=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
build=$(cd "$3" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/hpctrain-installed.XXXXXX")
trap 'rm -rf "$work"' EXIT
for tree in "$src" "$build"; do
  [[ "$work/" != "$tree/"* ]] || fail "$work is inside $tree: set TMPDIR elsewhere"
done
cd "$work"

"$b/bin/hpctrain" --version | tee version.txt
grep -Eq "^hpctrain [0-9.]+ \(commit [0-9a-f]{12}|unknown" version.txt || fail "--version names no commit"
[[ "$("$b/bin/hpctrain-data" --version)" == "hpctrain-data "* ]] || fail "hpctrain-data --version"
if grep -q "backends: cpu, cuda" version.txt; then  # the CUDA backend's module, from lib/hpctrain
  grep -q "^CUDA backend: $b/lib/hpctrain/libhpctrain_cuda.so (CUDA runtime" version.txt ||
    fail "the installed CUDA backend does not load"
fi

echo "== hpctrain-data fashion-mnist"
"$b/bin/hpctrain-data" fashion-mnist --out data/fashion-mnist
echo "== mpiexec -n 2 hpctrain train \$PREFIX/share/hpctrain/configs/fashion_mnist_mlp.yaml, 1 epoch"
mpiexec -n 2 "$b/bin/hpctrain" train "$b/share/hpctrain/configs/fashion_mnist_mlp.yaml" \
  --set train.epochs=1 --set run.threads=1 --set device=cpu
/usr/bin/python3 - <<'PY' || fail "summary.json of the run"
import json, math
s = json.load(open("runs/fashion_mnist_mlp/summary.json"))
assert s["world_size"] == 2 and s["epochs_completed"] == 1, s
assert s["version"] and s["git_commit"], "summary.json names no version or commit"
assert s["test_accuracy"] is not None and 0.5 < s["test_accuracy"] <= 1, s["test_accuracy"]
print("trained: 2 ranks, test accuracy", s["test_accuracy"])
PY

echo "== hpctrain init, a Python tool"
"$b/bin/hpctrain" init starter >init.txt || fail "hpctrain init: $(cat init.txt)"
cmp -s starter/fashion_mnist_mlp.yaml "$b/share/hpctrain/configs/fashion_mnist_mlp.yaml" ||
  fail "init did not copy the example config"
[[ -x starter/train_single_node.sbatch && -x starter/launch.sh ]] || fail "init: job scripts not executable"
if "$b/bin/hpctrain" init starter 2>err.txt; then fail "init overwrote files without --force"; fi
grep -q "exists already" err.txt || fail "init refusal: $(cat err.txt)"
# --force replaces files, not a folder where one goes: refused before anything is written.
rm starter/launch.sh && mkdir starter/launch.sh
echo "# edited" >>starter/fashion_mnist_mlp.yaml
rc=0
"$b/bin/hpctrain" init starter --force 2>err.txt || rc=$?
if [[ $rc -ne 2 ]] || ! grep -q "starter/launch.sh is a directory; nothing written" err.txt; then
  fail "init --force over a folder: exit $rc, expected 2: $(cat err.txt)"
fi
grep -q "# edited" starter/fashion_mnist_mlp.yaml || fail "init --force over a folder wrote files"
: >a_file
rc=0
"$b/bin/hpctrain" init a_file/starter 2>err.txt || rc=$?
if [[ $rc -ne 2 ]] || ! grep -q "cannot make a_file/starter" err.txt; then
  fail "init under a file: exit $rc, expected 2 naming the path: $(cat err.txt)"
fi
"$b/bin/hpctrain" scaling --help >/dev/null || fail "hpctrain scaling (Python tools) from the installation"
echo PASS
