#!/usr/bin/env python3
"""check_tree.py must fail on what it is meant to catch: each test builds a small git
repository, checks that it passes, adds one fault (an include cycle, a long file, a
reference to a path outside the repository or to a missing document) and checks that the
same command then fails naming it."""
import os
import subprocess
import sys
import tempfile
import unittest

CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "check_tree.py")
# The planted faults are built from pieces, so that this file itself names nothing outside
# the repository (check_tree.py references reads it too).
UP, MD = "../", ".md"


class CheckTree(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name
        subprocess.run(["git", "init", "-q", self.root], check=True)
        self.write("README.md", f"See docs/guide{MD} and `src/a/a.hpp`.\n")
        self.write("docs/guide" + MD, f"The map: {UP}README{MD}, and config{MD}.\n")
        self.write("docs/config.md", "keys\n")
        self.write("src/a/a.hpp", '#include "core/c.hpp"\n')
        self.write("src/core/c.hpp", "// no includes\n")
        self.write("kernels/k.cu", '#include "core/c.hpp"\n#include "kernels/k.cuh"\n')
        self.write("kernels/k.cuh", "\n")
        self.write("src/backend/cuda/b.cpp", '#include "kernels/k.cuh"\n')

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, path, text):
        full = os.path.join(self.root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as f:
            f.write(text)
        subprocess.run(["git", "-C", self.root, "add", path], check=True)

    def check(self, which):
        p = subprocess.run([sys.executable, CHECK, which, "--root", self.root],
                           capture_output=True, text=True)
        return p.returncode, p.stdout + p.stderr

    def test_include_cycle_between_folders(self):
        self.assertEqual(self.check("includes")[0], 0)
        # kernels/ including the Backend interface closes src/backend -> kernels -> src/backend.
        self.write("kernels/k.cuh", '#include "backend/backend.hpp"\n')
        self.write("src/backend/backend.hpp", "\n")
        code, out = self.check("includes")
        self.assertEqual(code, 1)
        self.assertIn("kernels -> src/backend -> kernels", out)
        self.assertIn("kernels/k.cuh -> src/backend/backend.hpp", out)

    def test_file_over_600_lines(self):
        self.write("src/a/long.cpp", "//\n" * 600)
        self.assertEqual(self.check("sizes")[0], 0)
        self.write("src/a/long.cpp", "//\n" * 601)
        code, out = self.check("sizes")
        self.assertEqual(code, 1)
        self.assertIn("src/a/long.cpp: 601 lines", out)

    def test_reference_outside_the_repository(self):
        self.assertEqual(self.check("references")[0], 0, self.check("references")[1])
        self.write("src/a/a.cpp", "// The map is in " + UP + "shared/DESIGN" + MD + ".\n")
        code, out = self.check("references")
        self.assertEqual(code, 1)
        self.assertIn(f"src/a/a.cpp:1: '{UP}shared/DESIGN{MD}' is not a path in the repository",
                      out)

    def test_relative_path_that_leaves_the_root(self):
        self.write("README.md", f"Data: {UP}{UP}datasets/x.h5 and ({UP}REFERENCE: the study)\n")
        code, out = self.check("references")
        self.assertEqual(code, 1)
        self.assertIn(f"'{UP}{UP}datasets/x.h5'", out)
        self.assertIn(f"'{UP}REFERENCE'", out)

    def test_document_that_is_not_in_the_repository(self):
        self.write("src/a/b.hpp", f"// Exit codes: STYLE{MD}, docs/missing{MD}\n")
        code, out = self.check("references")
        self.assertEqual(code, 1)
        self.assertIn(f"'STYLE{MD}' is not a document", out)
        self.assertIn(f"'docs/missing{MD}' is not a document", out)

    def test_paths_built_at_run_time_are_not_references(self):
        self.write("tests/t.sh", 'repo=$(cd "$here/../.." && pwd)\nout="$tmp/../x.h5"\n')
        self.assertEqual(self.check("references")[0], 0)


if __name__ == "__main__":
    unittest.main()
