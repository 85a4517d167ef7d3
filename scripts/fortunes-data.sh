#!/usr/bin/env bash
# The text of Debian's fortunes package (scripts/install-deps.sh installs it) as character
# windows for configs/fortunes_char_lstm.yaml: data/fortunes/{train,val,test}.h5, 100
# steps per window, 5% of the windows each for validation and test, spread over the text.
#   scripts/fortunes-data.sh [HPCTRAIN_DATA [OUT_DIR]]
# Paths given are relative to the working directory; the defaults, to the repository.
set -euo pipefail
tool="${1:-}"
out="${2:-}"
[[ "$tool" == */* && "$tool" != /* ]] && tool="$PWD/$tool"  # a name alone: on PATH
[[ -n "$out" && "$out" != /* ]] && out="$PWD/$out"
cd "$(dirname "$0")/.."
tool="${tool:-build/hpctrain-data}"
out="${out:-data/fortunes}"
dir=/usr/share/games/fortunes
# The quotation files are the ones with an index (X.dat) beside them.
mapfile -t files < <(find "$dir" -maxdepth 1 -name '*.dat' -printf '%p\n' 2>/dev/null |
                     sed 's/\.dat$//' | LC_ALL=C sort)
if [[ ${#files[@]} -eq 0 ]]; then
  echo "fortunes-data: no fortune files in $dir (apt-get install fortunes)" >&2
  exit 2
fi
echo "fortunes-data: ${#files[@]} files from $dir"
"$tool" text "${files[@]}" --out "$out" --seq-len 100 --val-fraction 0.05 --test-fraction 0.05
