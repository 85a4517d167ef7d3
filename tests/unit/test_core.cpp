// Core utilities: SHA-256 against FIPS 180-4 vectors, the portable Rng, atomic writes.
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/crash_note.hpp"
#include "core/crc32c.hpp"
#include "core/deadline.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/log.hpp"
#include "core/random.hpp"
#include "core/sha256.hpp"
#include "core/utf8.hpp"

namespace hpctrain {
namespace {

std::string sha_hex(const std::string& s) {
  Sha256 sha;
  sha.update(s.data(), s.size());
  return sha.finish_hex();
}

// The process still dies of the signal, after one line naming the file the thread was
// reading; outside a note nothing is added. (The default actions first: libucs, loaded
// with MPICH, and AddressSanitizer install handlers of their own, which would run next.)
TEST(CrashNote, NamesTheFileBeingReadAndStillDies) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        signal(SIGSEGV, SIG_DFL);
        install_crash_notes();
        const std::string path = "/data/damaged.h5";
        const CrashNote note(path);
        raise(SIGSEGV);
      },
      ::testing::KilledBySignal(SIGSEGV),
      "^error: fatal signal SIGSEGV while reading /data/damaged.h5 \\(a damaged file, or a "
      "bug in the library reading it\\)\n$");
  EXPECT_EXIT(
      {
        signal(SIGBUS, SIG_DFL);
        install_crash_notes();
        {
          const std::string path = "/data/done.h5";
          const CrashNote note(path);
        }
        std::fputs("last words\n", stderr);
        raise(SIGBUS);
      },
      ::testing::KilledBySignal(SIGBUS), "^last words\n$");
}

// A Deadline that runs out ends the process with its line and code; one that is destroyed
// in time does nothing.
TEST(Deadline, EndsTheProcessOnlyWhenTheTimeRunsOut) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  { const Deadline in_time(30.0, "never printed", 3); }
  {
    // A bound past what the clocks hold is none (a wait of 1e10 s ended at once).
    const Deadline huge(1e10, "never printed either", 3);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EXIT(
      {
        const Deadline late(0.05, "inspect: x.h5: no answer", 3);
        for (;;) pause();
      },
      ::testing::ExitedWithCode(3), "inspect: x.h5: no answer");
  // Once another thread has begun a failing exit (the watchdog's abort, which waits a moment
  // before MPI_Abort), a Deadline's warning and main's return end with its code, not theirs:
  // a job that printed "aborting" ended with 0.
  EXPECT_EQ(ending_code(5), 5);
  EXPECT_EXIT(
      {
        begin_failing_exit(1);
        const Deadline late(0.05, "done: this rank ends now with exit code 0", 0, true);
        for (;;) pause();
      },
      ::testing::ExitedWithCode(1), "this rank ends now");
  EXPECT_EXIT(
      {
        begin_failing_exit(4);
        std::exit(ending_code(0));
      },
      ::testing::ExitedWithCode(4), "");
}

// What summary.json may hold: a name or a path with bytes that are not UTF-8 (a Latin-1
// file name) is written with U+FFFD for each, so the file stays JSON.
TEST(Utf8, InvalidBytesAreFoundAndReplaced) {
  EXPECT_EQ(first_non_utf8("plain \xC3\xA9t\xC3\xA9 \xF0\x9F\x98\x80"), std::string::npos);
  EXPECT_EQ(first_non_utf8("bad\xFF\xFE"), 3u);
  EXPECT_EQ(first_non_utf8("\xC0\xAF"), 0u);          // an overlong '/'
  EXPECT_EQ(first_non_utf8("a\xED\xA0\x80"), 1u);     // a UTF-16 surrogate
  EXPECT_EQ(first_non_utf8("\xF4\x90\x80\x80"), 0u);  // above U+10FFFF
  EXPECT_EQ(first_non_utf8("ab\xE2\x82"), 2u);        // cut short
  EXPECT_EQ(first_non_utf8(std::string("a\0b", 3)), 1u);
  EXPECT_EQ(valid_utf8("bad\xFF\xFEname \xC3\xA9"), "bad\xEF\xBF\xBD\xEF\xBF\xBDname \xC3\xA9");
}

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, SplitUpdatesMatchOneUpdate) {
  const std::string s(1000, 'x');
  Sha256 a;
  for (size_t i = 0; i < s.size(); i += 7)
    a.update(s.data() + i, std::min<size_t>(7, s.size() - i));
  EXPECT_EQ(a.finish_hex(), sha_hex(s));
}

TEST(Crc32c, KnownVectorAndBothImplementationsAgree) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);  // the standard check value
  EXPECT_EQ(crc32c_portable("123456789", 9), 0xE3069283u);
  EXPECT_EQ(crc32c("", 0), 0u);
  Rng rng(3);
  std::vector<unsigned char> data(100003);
  for (auto& b : data) b = static_cast<unsigned char>(rng.next_u64());
  for (size_t n : {size_t{1}, size_t{7}, size_t{8}, size_t{13}, data.size()}) {
    EXPECT_EQ(crc32c(data.data(), n), crc32c_portable(data.data(), n)) << n;
  }
  // Continuing a CRC over pieces equals one pass over the whole.
  EXPECT_EQ(crc32c(data.data() + 5000, data.size() - 5000, crc32c(data.data(), 5000)),
            crc32c(data.data(), data.size()));
}

TEST(Rng, SameSeedSameSequenceDifferentSeedDifferent) {
  Rng a(42), b(42), c(43);
  for (int i = 0; i < 100; ++i) {
    const uint64_t x = a.next_u64();
    EXPECT_EQ(x, b.next_u64());
    EXPECT_NE(x, c.next_u64());
  }
}

TEST(Rng, UniformIntStaysInRangeAndCoversIt) {
  Rng rng(7);
  std::set<uint64_t> seen;
  for (int i = 0; i < 10000; ++i) {
    const uint64_t v = rng.uniform_int(13);
    ASSERT_LT(v, 13u);
    seen.insert(v);
  }
  EXPECT_EQ(seen.size(), 13u);
}

TEST(Rng, NormalHasUnitMoments) {
  Rng rng(1);
  double sum = 0, sum2 = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double x = rng.normal();
    sum += x;
    sum2 += x * x;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sum2 / n, 1.0, 0.02);
}

TEST(Rng, MixSeedSeparatesInputs) {
  EXPECT_NE(mix_seed(1, 2, 3), mix_seed(1, 3, 2));
  EXPECT_NE(mix_seed(1, 0, 0), mix_seed(2, 0, 0));
  EXPECT_EQ(mix_seed(5, 6, 7), mix_seed(5, 6, 7));
}

TEST(Files, AtomicWriteReplacesWholeFile) {
  const std::string dir = ::testing::TempDir() + "/ht_files_test/a/b";
  make_directories(dir);
  const std::string path = dir + "/out.txt";
  write_file_atomic(path, "first version\n");
  write_file_atomic(path, "second\n");
  std::ifstream in(path);
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, "second\n");
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    EXPECT_EQ(e.path().filename(), "out.txt") << "temporary file left behind";
  }
}

// Errors and warnings quote keys, paths and names as given: they stay one line, and an
// escape sequence does not reach the terminal.
TEST(Log, OneLineEscapesControlCharacters) {
  EXPECT_EQ(one_line("run.na\nme"), "run.na\\nme");
  EXPECT_EQ(one_line("a\tb\x1b[31mc\x7f\r"), "a\\tb\\x1b[31mc\\x7f\\x0d");
  EXPECT_EQ(one_line("caf\xc3\xa9 /x y.h5"), "caf\xc3\xa9 /x y.h5");  // UTF-8 kept
}

TEST(Files, MakeDirectoriesCreatesEveryMissingLevelOrSaysWhy) {
  namespace fs = std::filesystem;
  const std::string dir = ::testing::TempDir() + "/ht_files_mkdir";
  fs::remove_all(dir);
  std::error_code ec;
  EXPECT_TRUE(make_directories(dir + "/a/b/c/", ec)) << ec.message();  // a trailing slash
  EXPECT_TRUE(fs::is_directory(dir + "/a/b/c"));
  EXPECT_TRUE(make_directories(dir + "/a/b", ec)) << "an existing directory: " << ec.message();
  std::ofstream(dir + "/file") << "x";
  EXPECT_FALSE(make_directories(dir + "/file/d", ec));
  EXPECT_TRUE(ec);
  try {
    make_directories(dir + "/file/d");
    ADD_FAILURE() << "made a directory below a file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(dir + "/file/d: cannot create directory"),
              std::string::npos)
        << e.what();
  }
}

// On a read-only file system unlink() answers EROFS for a path that is not there too: no
// temporary to remove is no error there, one that is there still is. In a child with a
// mount namespace of its own (skipped where the process may not make one).
TEST(Files, NoTemporaryToRemoveOnAReadOnlyFileSystemIsNoError) {
  namespace fs = std::filesystem;
  const std::string dir = ::testing::TempDir() + "/ht_files_readonly";
  fs::remove_all(dir);
  make_directories(dir);
  std::ofstream(dir + "/there.tmp") << "x";
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (::unshare(CLONE_NEWNS) != 0 ||
        ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        ::mount(dir.c_str(), dir.c_str(), nullptr, MS_BIND, nullptr) != 0 ||
        ::mount(nullptr, dir.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) != 0) {
      ::_exit(77);
    }
    try {
      remove_temporary(dir + "/missing.tmp");
    } catch (...) {
      ::_exit(1);
    }
    try {
      remove_temporary(dir + "/there.tmp");
    } catch (const Error& e) {
      ::_exit(std::string(e.what()).find("Read-only file system") != std::string::npos ? 0 : 3);
    }
    ::_exit(2);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 77) GTEST_SKIP() << "no mount namespace here (unshare, mount)";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: a missing temporary was an error; 2: a present one "
                                       "was removed; 3: its error did not say why";
}

// A writer killed between creating PATH.tmp.<pid> and renaming it leaves that file; the
// next holder of the run's lock removes every such one but its own, and nothing else.
TEST(Files, StaleTemporariesOfOneFileAreRemoved) {
  namespace fs = std::filesystem;
  const std::string dir = ::testing::TempDir() + "/ht_files_stale";
  fs::remove_all(dir);
  make_directories(dir + "/elsewhere");
  const std::string own = "summary.json.tmp." + std::to_string(::getpid());
  for (const std::string& name :
       std::vector<std::string>{"summary.json", "summary.json.tmp.123", own, "summary.json.tmp.",
                                "summary.json.tmp.12x", "metrics.csv.tmp.5", "elsewhere/kept"}) {
    std::ofstream(dir + "/" + name) << "x";
  }
  fs::create_symlink(dir + "/elsewhere/kept", dir + "/summary.json.tmp.77");
  remove_stale_temporaries(dir + "/summary.json");
  std::set<std::string> left;
  for (const auto& e : fs::directory_iterator(dir)) left.insert(e.path().filename());
  EXPECT_EQ(left, (std::set<std::string>{"elsewhere", "metrics.csv.tmp.5", "summary.json",
                                         "summary.json.tmp.", own, "summary.json.tmp.12x"}));
  EXPECT_TRUE(fs::exists(dir + "/elsewhere/kept")) << "a link's target was removed";
}

TEST(Files, FailedCommitLeavesNoTemporaryFile) {
  const std::string dir = ::testing::TempDir() + "/ht_files_commit";
  std::filesystem::remove_all(dir);
  make_directories(dir + "/taken/inside");  // a directory that is not empty: rename fails
  const std::string temp = dir + "/x.tmp";
  std::ofstream(temp) << "finished\n";
  try {
    commit_file(temp, dir + "/taken");
    ADD_FAILURE() << "renamed over a directory";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(dir + "/taken: cannot rename " + temp + ": "),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(temp)) << "the temporary file was left";
}

// A writer's temporary: what an earlier writer left is removed, never written through (a
// symbolic or a hard link: the file it leads to keeps its bytes); one replaced behind the
// writer's back is never renamed over OUT, nor removed by it.
TEST(Files, AnOwnedTemporaryIsRenamedOnlyWhileItIsTheWritersOwn) {
  namespace fs = std::filesystem;
  const std::string dir = ::testing::TempDir() + "/ht_files_owned";
  fs::remove_all(dir);
  make_directories(dir);
  const std::string out = dir + "/out.h5", temp = out + ".tmp";
  const auto text = [](const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const auto create = [&](OwnedTemporary& t, const std::string& bytes) {
    std::ofstream(t.path(), std::ios::app) << bytes;
    t.own();
  };
  std::ofstream(dir + "/kept") << "kept";
  fs::create_hard_link(dir + "/kept", temp);
  {
    OwnedTemporary first(temp, out);
    EXPECT_FALSE(fs::exists(temp)) << "what an earlier writer left is still there";
    create(first, "first");
    first.commit();
  }
  EXPECT_EQ(text(out), "first");
  EXPECT_EQ(text(dir + "/kept"), "kept") << "written through a hard link";

  {  // a second writer of OUT while the first writes: the first fails, the second's is kept
    OwnedTemporary first(temp, out);
    create(first, "half of the first");
    OwnedTemporary second(temp, out);
    create(second, "second");
    try {
      first.commit();
      ADD_FAILURE() << "renamed another writer's temporary";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(out + ": not written: "), std::string::npos) << e.what();
    }
    first.remove();
    EXPECT_EQ(text(temp), "second") << "the first writer removed the second one's temporary";
    EXPECT_EQ(text(out), "first");
    second.commit();
  }
  EXPECT_EQ(text(out), "second");
  EXPECT_FALSE(fs::exists(temp));

  fs::create_symlink(dir + "/kept", temp);
  {
    OwnedTemporary writer(temp, out);  // a link there: removed, never written through
    EXPECT_FALSE(fs::is_symlink(temp));
    create(writer, "x");
  }  // not committed: removed
  EXPECT_FALSE(fs::exists(temp));
  EXPECT_EQ(text(dir + "/kept"), "kept");
  fs::create_directory(temp);
  EXPECT_THROW(OwnedTemporary(temp, out), UsageError);
}

}  // namespace
}  // namespace hpctrain
