#!/usr/bin/env bash
# Runs one benchmark command that writes a JSON result (its --out FILE) and adds
# to that file what is needed to reproduce it: the command, the date, the commit
# and the machine.
#   bench/record.sh bench/results/X.json -- COMMAND... --out bench/results/X.json
set -euo pipefail
out=$1
shift
[[ "${1:-}" == "--" ]] && shift
"$@"
python3 - "$out" "$*" <<'PY'
import json, os, subprocess, sys, datetime
path, command = sys.argv[1], sys.argv[2]
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
    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "commit": sh("git", "rev-parse", "--short", "HEAD"),
    "cpu": model[0] if model else "",
    "cores": os.cpu_count(),
    "loadavg_before": open("/proc/loadavg").read().split()[:3],
}
with open(path, "w") as f:
    json.dump(result, f, indent=2)
    f.write("\n")
print("recorded " + path)
PY
