"""Unit tests of tests/fuzz/run_fuzz.py's reading of a finding's report: which frame it
blames, so that the HDF5 library's findings are recorded without failing the suite and
hpctrain's fail it."""

import sys
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


if __name__ == "__main__":
    unittest.main()
