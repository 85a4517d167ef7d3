// The whole-file checksum of checkpoints (checkpoint_footer.hpp).
#include "checkpoint/checkpoint_footer.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/crc32c.hpp"
#include "core/error.hpp"

namespace hpctrain {
namespace {

constexpr char kMagic[8] = {'H', 'T', 'C', 'K', 'S', 'U', 'M', '1'};
constexpr size_t kChunk = size_t{1} << 20;

// Closes its descriptor however the scope ends.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

void put_le(unsigned char* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}

uint64_t get_le(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

// CRC-32C of the first `bytes` bytes of fd (the file `path`); false when the file ends
// early. A failed read (EIO) throws Error naming the file: not a fault of its contents.
bool crc_of_prefix(int fd, const std::string& path, uint64_t bytes, uint32_t& crc) {
  std::vector<unsigned char> buffer(kChunk);
  crc = 0;
  for (uint64_t done = 0; done < bytes;) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(kChunk, bytes - done));
    const ssize_t n = ::pread(fd, buffer.data(), want, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(path + ": cannot read: " + std::strerror(errno));
    if (n == 0) return false;
    crc = crc32c(buffer.data(), static_cast<size_t>(n), crc);
    done += static_cast<uint64_t>(n);
  }
  return true;
}

// Reads the last kFooterBytes of fd (the file `path`, whose size it sets) into footer;
// false when the file is too short or does not end in the footer's magic.
bool read_footer(int fd, const std::string& path, uint64_t& size, unsigned char* footer) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw Error(path + ": cannot stat: " + std::strerror(errno));
  size = static_cast<uint64_t>(st.st_size);
  if (size < kFooterBytes) return false;
  if (::pread(fd, footer, kFooterBytes, static_cast<off_t>(size - kFooterBytes)) !=
      static_cast<ssize_t>(kFooterBytes)) {
    throw Error(path + ": cannot read: " + std::strerror(errno));
  }
  return std::memcmp(footer, kMagic, sizeof(kMagic)) == 0;
}

}  // namespace

void append_checksum_footer(const std::string& path) {
  Fd f{::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW)};
  if (f.fd < 0) throw Error(path + ": cannot open to add its checksum: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) throw Error(path + ": cannot stat: " + std::strerror(errno));
  const auto size = static_cast<uint64_t>(st.st_size);
  uint32_t crc = 0;
  if (!crc_of_prefix(f.fd, path, size, crc)) {
    throw Error(path + ": cannot read back to checksum: " + std::strerror(errno));
  }
  unsigned char footer[kFooterBytes];
  std::memcpy(footer, kMagic, sizeof(kMagic));
  put_le(footer + 8, size, 8);
  put_le(footer + 16, crc, 4);
  put_le(footer + 20, crc32c(footer, 20), 4);
  for (size_t done = 0; done < kFooterBytes;) {
    const ssize_t n =
        ::pwrite(f.fd, footer + done, kFooterBytes - done, static_cast<off_t>(size + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error(path + ": cannot write its checksum: " + std::strerror(errno));
    done += static_cast<size_t>(n);
  }
}

bool ends_in_checksum_footer(const std::string& path) {
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) throw Error(path + ": cannot open: " + std::strerror(errno));
  uint64_t size = 0;
  unsigned char footer[kFooterBytes];
  return read_footer(f.fd, path, size, footer);
}

Footer verify_checksum_footer(const std::string& path) {
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) throw Error(path + ": cannot open: " + std::strerror(errno));
  uint64_t size = 0;
  unsigned char footer[kFooterBytes];
  if (!read_footer(f.fd, path, size, footer)) return Footer::kAbsent;
  const std::string corrupt = path + ": the whole-file checksum does not match (corrupt): ";
  if (get_le(footer + 20, 4) != crc32c(footer, 20)) {
    throw UsageError(corrupt + "its footer is damaged");
  }
  if (get_le(footer + 8, 8) != size - kFooterBytes) {
    throw UsageError(corrupt + "its length differs (truncated, or bytes added)");
  }
  uint32_t crc = 0;
  if (!crc_of_prefix(f.fd, path, size - kFooterBytes, crc) || crc != get_le(footer + 16, 4)) {
    throw UsageError(corrupt +
                     "its contents changed after it was written (a bit flipped, or "
                     "bytes overwritten)");
  }
  return Footer::kValid;
}

}  // namespace hpctrain
