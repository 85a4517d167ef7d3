// Block-wise row copies between data files: read a block of whole rows by hyperslab, then
// append it whole (copy_row_range) or routed row by row to several writers (route_rows).
#include "data-tools/row_copy.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "core/error.hpp"
#include "data-tools/progress_note.hpp"
#include "data-tools/sample_codec.hpp"
#include "h5/h5.hpp"

namespace hpctrain {

std::string read_source_attribute(const std::string& path) {
  h5_quiet();
  const H5Handle file = h5_open_read_only(path);
  if (HT_CHECK_H5(H5Aexists(file.get(), "source")) <= 0) return "";
  H5Handle attr(HT_CHECK_H5(H5Aopen(file.get(), "source", H5P_DEFAULT)), H5Aclose);
  const std::vector<std::string> values = h5_read_strings(attr.get(), path + ": attribute source");
  std::string joined;
  for (const std::string& v : values) joined += (joined.empty() ? "" : "; ") + v;
  return joined;
}

void require_images(const DatasetFile& src) {
  if (src.shape().tokens()) {
    throw UsageError(src.path() + ": a token file; split and shard copy image files (hpctrain-" +
                     "data text makes the splits of a text itself)");
  }
}

DatasetWriterOptions derived_writer_options(const DatasetFile& src, const std::string& derivation,
                                            int deflate_level) {
  const DatasetShape& s = src.shape();
  DatasetWriterOptions o;
  o.type = s.type;
  o.c = s.c;
  o.h = s.h;
  o.w = s.w;
  o.num_classes = s.num_classes;
  o.class_names = s.class_names;
  // The parts normalise as the file did (data.normalize: auto): its statistics go with them.
  o.mean = s.mean;
  o.stddev = s.stddev;
  const std::string origin = read_source_attribute(src.path());
  o.source = origin.empty() ? derivation : origin + "; " + derivation;
  o.deflate_level = deflate_level;
  return o;
}

int64_t copy_block_rows(size_t sample_bytes) {
  return stream_batch_rows(static_cast<int64_t>(sample_bytes));
}

void copy_row_range(const DatasetFile& src, int64_t start, int64_t count, DatasetWriter& writer) {
  const size_t row_bytes = src.shape().sample_bytes();
  const int64_t block = copy_block_rows(row_bytes);
  std::vector<uint8_t> images(static_cast<size_t>(std::min(block, count)) * row_bytes);
  std::vector<int32_t> labels(static_cast<size_t>(std::min(block, count)));
  ProgressNote note("writing " + writer.path(), count);
  for (int64_t done = 0; done < count; done += block) {
    note.update(done);
    const int64_t n = std::min(block, count - done);
    src.read_rows(start + done, n, images.data(), labels.data());
    writer.append(n, images.data(), labels.data());
  }
}

void route_rows(const DatasetFile& src, const std::vector<uint8_t>& part,
                const std::vector<DatasetWriter*>& writers) {
  const int64_t n = src.shape().n;
  HT_REQUIRE(static_cast<int64_t>(part.size()) == n, src.path() + ": routing table size");
  const size_t row_bytes = src.shape().sample_bytes();
  const int64_t block = copy_block_rows(row_bytes);
  const auto block_rows = static_cast<size_t>(std::min(block, n));
  std::vector<uint8_t> images(block_rows * row_bytes), out_images(block_rows * row_bytes);
  std::vector<int32_t> labels(block_rows), out_labels(block_rows);
  ProgressNote note("splitting " + src.path(), n);
  for (int64_t start = 0; start < n; start += block) {
    note.update(start);
    const int64_t count = std::min(block, n - start);
    src.read_rows(start, count, images.data(), labels.data());
    // Gather each part's rows of this block (in order) and append them in one call.
    for (size_t p = 0; p < writers.size(); ++p) {
      size_t kept = 0;
      for (int64_t i = 0; i < count; ++i) {
        if (part[static_cast<size_t>(start + i)] != p) continue;
        std::memcpy(out_images.data() + kept * row_bytes,
                    images.data() + static_cast<size_t>(i) * row_bytes, row_bytes);
        out_labels[kept++] = labels[static_cast<size_t>(i)];
      }
      writers[p]->append(static_cast<int64_t>(kept), out_images.data(), out_labels.data());
    }
  }
}

void check_outputs_differ(const std::string& input, const std::vector<std::string>& outputs) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path in = fs::weakly_canonical(input, ec);
  for (const std::string& out : outputs) {
    std::error_code ec2;
    const fs::path o = fs::weakly_canonical(out, ec2);
    if (!ec && !ec2 && o == in) {
      throw UsageError(out + ": output would overwrite the input file " + input);
    }
    // A writer removes OUT.tmp first and writes the file there.
    if (!ec && !ec2 && fs::path(o.string() + ".tmp") == in) {
      throw UsageError(out + ": the output's temporary file " + out +
                       ".tmp would replace the input file " + input);
    }
  }
}

}  // namespace hpctrain
