#!/usr/bin/env bash
# The README's first quick-start command, as written: scripts/quickstart.sh installs the
# dependencies (present already: a check), builds build/ (up to date: a check), converts
# Fashion-MNIST into data/fashion-mnist/ (kept if there) and trains the MLP on 2 ranks;
# here for one epoch, into a run directory under the build tree. Skipped (77) unless the
# build tree is SOURCE/build, the one the script builds, and the user is root (apt).
#   bash tests/install/quickstart.sh SOURCE BUILD
set -euo pipefail
fail() { echo "FAIL: $*" >&2; exit 1; }
src=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
if [[ "$build" != "$src/build" ]]; then
  echo "SKIP: the build tree $build is not $src/build, which scripts/quickstart.sh builds"
  exit 77
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "SKIP: scripts/quickstart.sh installs packages as root"
  exit 77
fi
run="$build/quickstart-run"
rm -rf "$run"
bash "$src/scripts/quickstart.sh" --set train.epochs=1 --set "run.dir=$run" ||
  fail "scripts/quickstart.sh exited $?"
[[ -f "$src/data/fashion-mnist/train.h5" && -f "$src/data/fashion-mnist/test.h5" ]] ||
  fail "no data/fashion-mnist/{train,test}.h5"
/usr/bin/python3 - "$run/summary.json" <<'PY' || fail "summary.json of the quick start's run"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["world_size"] == 2 and s["epochs_completed"] == 1, s
assert s["test_accuracy"] is not None and 0.5 < s["test_accuracy"] <= 1, s["test_accuracy"]
print("quick start: 2 ranks, 1 epoch, test accuracy", s["test_accuracy"])
PY
echo PASS
