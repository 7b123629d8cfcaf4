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
#include <string>
#include <string_view>

#include "trace/gzip_read_stream.h"

namespace tailscope::trace {

class LineChunks {
 public:
  // Chunks aim at `target_bytes`; a line longer than `max_line_bytes` stops
  // the cutting (next() returns kLineTooLong).
  LineChunks(GzipReadStream& stream, std::size_t target_bytes, std::size_t max_line_bytes);

  enum class Status : std::uint8_t { kChunk, kEnd, kLineTooLong, kStreamError };
  // The next chunk into `chunk` (its previous content replaced; capacity kept),
  // with its offset in the decompressed input.
  Status next(std::string& chunk, std::uint64_t* offset);

 private:
  bool fill(std::size_t want);  // reads until pending_ holds `want` bytes or the input ends

  GzipReadStream& stream_;
  std::size_t target_bytes_;
  std::size_t max_line_bytes_;
  std::string pending_;  // read, not yet handed out
  std::uint64_t offset_ = 0;
};

// True when `text` holds only JSON whitespace (a chunk with no value).
bool is_blank_json(std::string_view text);

}  // namespace tailscope::trace
