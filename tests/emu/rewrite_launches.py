#!/usr/bin/env python3
"""Turns a kernels/ source into C++ for the CPU emulation (tests/emu/cuda_emu.hpp).

Usage: rewrite_launches.py IN.cu OUT.cpp

Each launch `name<targs><<<grid, block, shared, stream>>>(args)` becomes
`::emu::launch(grid, block, shared, stream,
               [](auto... emu_args) { name<targs>(emu_args...); }, args)`:
the kernel's template arguments may still be deduced from the arguments. Lines keep
their numbers, and a #line directive names the original file, so compiler messages and
sanitizer reports point into kernels/.
"""
import re
import sys

LAUNCH = re.compile(
    r"(?P<kernel>\b[A-Za-z_]\w*(?:<[^<>;{}]*>)?)\s*<<<(?P<config>.*?)>>>\s*\(", re.DOTALL)


def closing_paren(text, i):
    """The index of the parenthesis that closes the one before text[i]."""
    depth = 1
    while depth:
        if i == len(text):
            raise SystemExit("rewrite_launches.py: unbalanced launch arguments")
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        i += 1
    return i - 1


def rewrite(text):
    out, pos, count = [], 0, 0
    while (m := LAUNCH.search(text, pos)) is not None:
        end = closing_paren(text, m.end())
        config = " ".join(m.group("config").split())
        newlines = text.count("\n", m.start(), m.end())
        out.append(text[pos:m.start()])
        kernel = f"[](auto... emu_args) {{ {m.group('kernel')}(emu_args...); }}"
        out.append(f"::emu::launch({config}, {kernel}, " + "\n" * newlines +
                   text[m.end():end] + ")")
        pos, count = end + 1, count + 1
    out.append(text[pos:])
    result = "".join(out)
    if "<<<" in result:
        raise SystemExit("rewrite_launches.py: a launch it cannot parse is left")
    return result, count


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    source, target = sys.argv[1], sys.argv[2]
    with open(source, encoding="utf-8") as f:
        text, count = rewrite(f.read())
    if count == 0 and "__global__" in text:
        raise SystemExit(f"rewrite_launches.py: no launch found in {source}")
    with open(target, "w", encoding="utf-8") as f:
        f.write(f'#line 1 "{source}"\n' + text)


if __name__ == "__main__":
    main()
