// Cuts an input (plain or gzip file, decompressed) into chunks that end at a
// line boundary, for `tailscope-critpath --jobs N`: NDJSON holds one trace
// (or envelope, or OTLP document) per line, so chunks of whole lines can be
// parsed by separate workers. Whether each cut really falls between two
// top-level JSON values is not known here: a JSON string cannot hold a raw
// newline, but a pretty-printed document has newlines inside its objects.
// The caller checks it by induction — the first chunk starts at the input's
// start, and a chunk that parses completely (no value left open at its end)
// ends where a value ends, so the next one starts at a boundary too — and
// reads the input with the single-job reader when a chunk does not parse.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "trace/gzip_read_stream.h"

namespace tailscope::trace {

// A chunk, followed by `padding` zero bytes (for reading it in place:
// trace/trace_reader.h read_padded_trace_text). The buffer is never
// zero-filled: every byte is read over before it is used.
struct ChunkText {
  std::unique_ptr<char[]> data;
  std::size_t size = 0;
  std::size_t capacity = 0;  // bytes of text the buffer has room for, padding apart
  std::string_view view() const { return {data.get(), size}; }
};

class LineChunks {
 public:
  // Chunks aim at `target_bytes`; a line longer than `max_line_bytes` stops
  // the cutting (next() returns kLineTooLong).
  LineChunks(GzipReadStream& stream, std::size_t target_bytes, std::size_t max_line_bytes, std::size_t padding);

  enum class Status : std::uint8_t { kChunk, kEnd, kLineTooLong, kStreamError };
  // The next chunk into `chunk` (read into its buffer directly), with its
  // offset in the decompressed input.
  Status next(ChunkText& chunk, std::uint64_t* offset);

 private:
  void reserve(ChunkText& chunk, std::size_t capacity) const;

  GzipReadStream& stream_;
  std::size_t target_bytes_;
  std::size_t max_line_bytes_;
  std::size_t padding_;
  std::string carry_;  // the start of a line read with the previous chunk
  std::uint64_t offset_ = 0;
};

// True when `text` holds only JSON whitespace (a chunk with no value).
bool is_blank_json(std::string_view text);

}  // namespace tailscope::trace
