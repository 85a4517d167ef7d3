#!/usr/bin/env python3
"""docs/config.md must be what `hpctrain config --markdown` prints, and `hpctrain config
--list` must list the same keys, so that the reference in the repository is the schema the
program checks configs against. On a difference it prints the diff and the command that
regenerates the file.

  check_config_reference.py BUILD/hpctrain docs/config.md
"""
import difflib
import re
import subprocess
import sys


def main():
    hpctrain, doc = sys.argv[1], sys.argv[2]
    markdown = subprocess.run([hpctrain, "config", "--markdown"], capture_output=True, text=True,
                              check=True).stdout
    listing = subprocess.run([hpctrain, "config", "--list"], capture_output=True, text=True,
                             check=True).stdout
    with open(doc, encoding="utf-8") as f:
        committed = f.read()
    if committed != markdown:
        sys.stderr.writelines(difflib.unified_diff(committed.splitlines(True),
                                                   markdown.splitlines(True), doc,
                                                   "hpctrain config --markdown"))
        print(f"{doc} is out of date: run `build/hpctrain config --markdown > {doc}`",
              file=sys.stderr)
        return 1
    # Keys of the Markdown tables (model.layers entries: "### type" then "`key`" rows)
    # against the first column of --list (model.layers[type].key).
    documented, section, layer_type = set(), "", None
    for line in markdown.splitlines():
        if line.startswith("## "):
            section, layer_type = line[3:].strip(), None
        elif line.startswith("### "):
            layer_type = line[4:].strip()
        m = re.match(r"\| `([^`]+)` \|", line)
        if m and section != "Exchange strategies":
            key = m.group(1)
            documented.add(f"model.layers[{layer_type}].{key}" if layer_type else key)
    listed = {line.split()[0] for line in listing.splitlines()[1:] if line and line[0] != " "
              and not line.startswith("distributed.strategy:")}
    if documented != listed:
        print("keys only in docs/config.md: " + ", ".join(sorted(documented - listed)),
              file=sys.stderr)
        print("keys only in --list: " + ", ".join(sorted(listed - documented)), file=sys.stderr)
        return 1
    print(f"{doc} is the program's reference ({len(listed)} keys)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
