"""Unit tests of tests/fuzz/run_fuzz.py's reading of a finding's report: which frame it
blames, so that the HDF5 library's findings are recorded without failing the suite and
hpctrain's fail it."""

import os
import stat
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))

import run_fuzz  # noqa: E402

# An RSS out-of-memory report as libFuzzer prints it: libFuzzer's own buffers first (its
# main), then what the library holds.
OOM_IN_HDF5 = """==1== ERROR: libFuzzer: out-of-memory (used: 2134Mb; limit: 2048Mb)
Live Heap Allocations: 25869871 bytes in 3294 chunks; showing top 95%
20971840 byte(s) (81%) in 1 allocation(s)
    #0 0x560d27ff51ad in operator new(unsigned long) (/b/fuzz_checkpoint+0x1531ad)
    #1 0x560d27f0ceed in fuzzer::FuzzerDriver(int*, char***) (/b/fuzz_checkpoint+0x6aeed)
    #2 0x560d27f37672 in main (/b/fuzz_checkpoint+0x95672)
    #3 0x7f91ae245249 in __libc_start_call_main csu/../sysdeps/nptl/libc_start_call_main.h:58

1488636 byte(s) (5%) in 1971 allocation(s)
    #0 0x560d27fba3fe in malloc (/b/fuzz_checkpoint+0x1183fe)
    #1 0x7f91aeb233e4  (/lib/x86_64-linux-gnu/libhdf5_serial.so.103+0x1233e4)

SUMMARY: libFuzzer: out-of-memory
"""

OOM_IN_HPCTRAIN = OOM_IN_HDF5.replace(
    "0x7f91aeb233e4  (/lib/x86_64-linux-gnu/libhdf5_serial.so.103+0x1233e4)",
    "0x55aa in hpctrain::read_array(long, std::string const&) src/checkpoint/x.cpp:9")

CRASH_IN_HDF5 = """==1==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x6
    #0 0x55e4 in __asan_memcpy (/b/fuzz_checkpoint+0x1)
    #1 0x7ff6 in H5HG_read (/lib/x86_64-linux-gnu/libhdf5_serial.so.103+0x190f18)
    #2 0x55e5 in hpctrain::read_string(long) src/checkpoint/checkpoint_file.cpp:38
"""


class Culprit(unittest.TestCase):
    def test_out_of_memory_blames_what_holds_the_heap(self):
        # Not libFuzzer's main, whose stack the report lists first.
        self.assertIn("libhdf5", run_fuzz.culprit(OOM_IN_HDF5))
        self.assertIn("hpctrain::read_array", run_fuzz.culprit(OOM_IN_HPCTRAIN))

    def test_a_crash_blames_its_innermost_frame_past_the_sanitizer(self):
        self.assertIn("H5HG_read", run_fuzz.culprit(CRASH_IN_HDF5))


# A stand-in for a fuzz target run on one saved input: the RSS report of a peak made by an
# allocation already freed (only libFuzzer's own buffers live), and, when run with a malloc
# limit, the report of the allocation that made the peak, from FAKE_PEAK_FRAME ("": no
# allocation over the limit, the RSS report again).
FAKE_TARGET = """#!/usr/bin/python3
import os, sys
frame = os.environ["FAKE_PEAK_FRAME"]
if frame and any(a.startswith("-malloc_limit_mb=") for a in sys.argv[1:]):
    sys.stderr.write("==1== ERROR: libFuzzer: out-of-memory (malloc(1900000000))\\n"
                     "    #0 0x1 in __sanitizer_print_stack_trace (/b/fuzz+0x1)\\n"
                     "    #1 0x2 in malloc (/b/fuzz+0x2)\\n"
                     "    #2 0x3 in " + frame + "\\n")
else:
    sys.stderr.write("==1== ERROR: libFuzzer: out-of-memory (used: 2134Mb; exceeds: 2048Mb)\\n"
                     "Live Heap Allocations: 25869871 bytes in 3294 chunks\\n"
                     "20971840 byte(s) (81%) in 1 allocation(s)\\n"
                     "    #0 0x4 in operator new(unsigned long) (/b/fuzz+0x4)\\n"
                     "    #1 0x5 in fuzzer::FuzzerDriver(int*, char***) (/b/fuzz+0x5)\\n"
                     "    #2 0x6 in main (/b/fuzz+0x6)\\n")
sys.exit(1)
"""


class PeakOutOfMemory(unittest.TestCase):
    """An RSS out-of-memory whose report names no live allocation of the input's is run
    again with a malloc limit and blamed on the allocation that made the peak."""

    def classify(self, frame):
        with tempfile.TemporaryDirectory() as tmp:
            target = os.path.join(tmp, "fuzz_fake")
            with open(target, "w") as f:
                f.write(FAKE_TARGET)
            os.chmod(target, os.stat(target).st_mode | stat.S_IXUSR)
            return run_fuzz.classify(target, os.path.join(tmp, "oom-1"),
                                     dict(os.environ, FAKE_PEAK_FRAME=frame))

    def test_a_peak_made_in_hdf5_is_the_librarys(self):
        where, frame = self.classify("H5Z_filter_deflate (/lib/libhdf5_serial.so.103+0x9)")
        self.assertEqual(where, "hdf5")
        self.assertIn("H5Z_filter_deflate", frame)

    def test_a_peak_made_in_hpctrain_fails(self):
        where, frame = self.classify("hpctrain::read_classes(long) src/data/dataset_file.cpp:9")
        self.assertEqual(where, "hpctrain")
        self.assertIn("hpctrain::read_classes", frame)

    def test_a_peak_with_no_large_allocation_is_unattributed(self):
        where, why = self.classify("")
        self.assertEqual(where, "unattributed")
        self.assertIn(f"none over {run_fuzz.PEAK_MALLOC_LIMIT_MB} MB", why)


if __name__ == "__main__":
    unittest.main()
