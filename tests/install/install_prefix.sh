#!/usr/bin/env bash
# Fixture of the install tests: `cmake --install` into a prefix A, A copied to B and
# removed, so the tests that follow use an installation that has been moved. Checks the
# layout (cmake/install.cmake) and that nothing in B names the build tree, the source
# tree or A: the programs and the module file find their files from their own path.
#   bash tests/install/install_prefix.sh BUILD SOURCE OUT      (makes OUT/B)
set -euo pipefail
fail() { echo "FAIL: $*" >&2; exit 1; }
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
out=$3
rm -rf "$out"
mkdir -p "$out"
out=$(cd "$out" && pwd)

cmake --install "$build" --prefix "$out/A" >"$out/install.log" || fail "cmake --install: $(cat "$out/install.log")"
cp -a "$out/A" "$out/B"
rm -rf "$out/A"
b=$out/B

version=$(sed -n 's/^project(hpctrain VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
for f in bin/hpctrain bin/hpctrain-data share/hpctrain/jobs/train_single_node.sbatch \
  share/hpctrain/jobs/launch.sh share/hpctrain/jobs/chain.sh; do
  [[ -x "$b/$f" ]] || fail "$f is missing or not executable in the installation"
done
for f in share/hpctrain/python/hpctrain_tools/__main__.py "modulefiles/hpctrain/$version"; do
  [[ -f "$b/$f" ]] || fail "$f is missing from the installation"
done
if [[ -f "$build/lib/hpctrain/libhpctrain_cuda.so" ]]; then  # a build with the CUDA backend
  [[ -f "$b/lib/hpctrain/libhpctrain_cuda.so" ]] || fail "lib/hpctrain/libhpctrain_cuda.so is missing"
fi
# The example configs, every file of jobs/ (executable where the source is), the README
# and docs/, as they are.
installed_as() {  # installed_as SOURCE_FILE INSTALLED_FILE
  cmp -s "$1" "$2" || fail "${1#"$src"/} is not installed as it is (${2#"$b"/})"
  if [[ -x "$1" ]] && [[ ! -x "$2" ]]; then fail "${2#"$b"/} is not executable"; fi
  if [[ ! -x "$1" ]] && [[ -x "$2" ]]; then fail "${2#"$b"/} is executable"; fi
}
for f in "$src"/configs/*.yaml; do installed_as "$f" "$b/share/hpctrain/configs/${f##*/}"; done
for f in "$src"/jobs/*; do installed_as "$f" "$b/share/hpctrain/jobs/${f##*/}"; done
for f in "$src"/README.md "$src"/LICENSE; do installed_as "$f" "$b/share/doc/hpctrain/${f##*/}"; done
for f in "$src"/docs/*.md; do installed_as "$f" "$b/share/doc/hpctrain/docs/${f##*/}"; done

for p in "$build" "$src" "$out/A"; do
  if named=$(grep -rlF -- "$p" "$b"); then
    fail "installed files name $p, so the installation cannot move: $named"
  fi
done
echo "installed and moved to $b ($(find "$b" -type f | wc -l) files)"
