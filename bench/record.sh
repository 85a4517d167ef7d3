#!/usr/bin/env bash
# Runs one benchmark command that writes a JSON result (its --out FILE) and adds
# to that file what is needed to reproduce it: the command, the date, the commit
# and the machine.
#   bench/record.sh bench/results/X.json -- COMMAND... --out bench/results/X.json
set -euo pipefail
out=$1
shift
[[ "${1:-}" == "--" ]] && shift
# Taken before the command: its own load and time are not the machine's state it ran in.
started=$(date -u +%Y-%m-%dT%H:%M:%S+00:00)
read -r load1 load5 load15 _ < /proc/loadavg
"$@"
read -r end1 end5 end15 _ < /proc/loadavg
python3 - "$out" "$*" "$started" "$load1 $load5 $load15" "$end1 $end5 $end15" <<'PY'
import json, os, subprocess, sys
path, command, started, before, after = sys.argv[1:6]
with open(path) as f:
    result = json.load(f)
def sh(*cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""
model = [l.split(":", 1)[1].strip() for l in sh("lscpu").splitlines() if l.startswith("Model name")]
result["recorded"] = {
    "command": command,
    "date": started,
    "commit": sh("git", "rev-parse", "--short", "HEAD"),
    "cpu": model[0] if model else "",
    "cores": os.cpu_count(),
    "loadavg_before": before.split(),
    "loadavg_after": after.split(),
}
with open(path, "w") as f:
    json.dump(result, f, indent=2)
    f.write("\n")
print("recorded " + path)
PY
