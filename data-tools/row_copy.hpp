// Copying rows of one data file into others (split, shard): writer options that keep the
// source's sample type, shape and attributes, and block-wise copies in bounded memory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data-tools/dataset_writer.hpp"
#include "data/dataset_file.hpp"

namespace hpctrain {

// The source's `source` attribute, or "" if it has none.
std::string read_source_attribute(const std::string& path);

// Throws UsageError for a token file: these helpers copy /images and /labels.
void require_images(const DatasetFile& src);

// Options for a file derived from `src`: same type, shape, num_classes and class names; the
// source attribute is the source's own followed by "; " and `derivation`.
DatasetWriterOptions derived_writer_options(const DatasetFile& src, const std::string& derivation,
                                            int deflate_level);

// Rows per block that copies read, for samples of `sample_bytes` (at least 1).
int64_t copy_block_rows(size_t sample_bytes);

// Appends rows [start, start + count) of `src` to `writer`, a block at a time.
void copy_row_range(const DatasetFile& src, int64_t start, int64_t count, DatasetWriter& writer);

// Reads every row of `src` once, in order, and appends row i to writers[part[i]]; a row
// whose part is not below writers.size() is dropped. Rows keep their order in each writer.
// Memory: two blocks, whatever the number of rows.
void route_rows(const DatasetFile& src, const std::vector<uint8_t>& part,
                const std::vector<DatasetWriter*>& writers);

// Throws UsageError if any of `outputs`, or its temporary OUT.tmp, is the same file as
// `input` (it would be replaced while being read).
void check_outputs_differ(const std::string& input, const std::vector<std::string>& outputs);

}  // namespace hpctrain
