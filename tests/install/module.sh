#!/usr/bin/env bash
# The module file of an installation that has been moved (install_prefix.sh):
#   module use PREFIX/modulefiles; module load hpctrain
# puts the programs on PATH and sets HPCTRAIN_PREFIX; unloading takes them off again. The
# same through a symbolic link to the module file from another module folder (how a site
# adds it to its module tree).
# With whichever of Environment Modules (environment-modules, which scripts/install-deps.sh
# installs) and Lmod (lmod) is installed: Debian lets only one of them in at a time.
#   bash tests/install/module.sh PREFIX        exit 0 pass, 1 fail, 77 skip
set -eo pipefail  # not -u: the module shell functions read unset variables
fail() { echo "FAIL: $*" >&2; exit 1; }
b=$(cd "$1" && pwd -P)
links=$(mktemp -d)
trap 'rm -rf "$links"' EXIT
version=$(ls "$b/modulefiles/hpctrain")
mkdir "$links/hpctrain"
ln -s "$b/modulefiles/hpctrain/$version" "$links/hpctrain/$version"
declare -A inits=([environment-modules]=/usr/share/modules/init/bash
  [lmod]=/usr/share/lmod/lmod/init/bash)
tested=0
for tool in environment-modules lmod; do
  init=${inits[$tool]}
  if [[ ! -r "$init" ]]; then
    echo "$tool: not installed ($init), not tested"
    continue
  fi
  for dir in "$b/modulefiles" "$links"; do
    echo "== $tool: module use $dir"
    # A clean shell each: the two tools define `module` differently.
    # shellcheck disable=SC2016  # expanded by that shell
    env -i HOME="$HOME" PATH=/usr/bin:/bin b="$b" dir="$dir" init="$init" bash -c '
      fail() { echo "FAIL: $*" >&2; exit 1; }
      source "$init" || fail "sourcing $init"
      module use "$dir" || fail "module use"
      module load hpctrain || fail "module load hpctrain"
      [[ "$(command -v hpctrain)" == "$b/bin/hpctrain" ]] || fail "hpctrain on PATH is $(command -v hpctrain), not $b/bin/hpctrain"
      [[ "$(command -v hpctrain-data)" == "$b/bin/hpctrain-data" ]] || fail "hpctrain-data not on PATH"
      [[ "$HPCTRAIN_PREFIX" == "$b" ]] || fail "HPCTRAIN_PREFIX=$HPCTRAIN_PREFIX, expected $b"
      hpctrain --version | head -1 || fail "hpctrain --version"
      module unload hpctrain || fail "module unload hpctrain"
      if command -v hpctrain >/dev/null; then fail "hpctrain still on PATH after unload"; fi
      [[ -z "$HPCTRAIN_PREFIX" ]] || fail "HPCTRAIN_PREFIX still set after unload"
    ' || fail "$tool, $dir"
  done
  tested=$((tested + 1))
done
if ((tested == 0)); then
  echo "SKIP: neither environment-modules nor lmod is installed (scripts/install-deps.sh installs environment-modules)"
  exit 77
fi
echo PASS
