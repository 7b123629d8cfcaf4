// Cuts an input into chunks that end at a line boundary, for
// `tailscope-critpath --jobs N`: LineChunks reads any input (plain or gzip,
// decompressed) in order on one thread; FileLineChunks lets each worker read
// its own chunk of a plain file with pread(2), so that the thread merging the
// results in order does not also copy the whole input. NDJSON holds one trace
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

// A chunk of `size` bytes at `begin` in the buffer, followed by `padding`
// zero bytes (for reading it in place: trace/trace_reader.h
// read_padded_trace_text). The buffer is never zero-filled: every byte is
// read over before it is used.
struct ChunkText {
  std::unique_ptr<char[]> data;
  std::size_t begin = 0;  // FileLineChunks reads from before the chunk's first line
  std::size_t size = 0;
  std::size_t capacity = 0;  // bytes the buffer has room for, padding apart
  std::string_view view() const { return {data.get() + begin, size}; }
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

// A plain regular file cut at fixed nominal offsets, chunk k reading itself:
// it starts after the first newline at or after byte k x target - 1 (chunk 0
// at byte 0) and ends after the first newline at or after its successor's
// nominal start - 1 (or at the end of the file). Each worker finds both ends
// by itself, and neighbours agree on the cut between them without talking to
// each other. A line longer than a chunk leaves the chunks it spans empty and
// belongs to the chunk where it starts. read() is const and may run on many
// threads at once (pread(2) on one descriptor).
class FileLineChunks {
 public:
  // Opens `path`: ok() is false when it is not a plain regular file (a pipe,
  // gzip data, a path that cannot be opened); the caller then reads it with
  // LineChunks or the single-job reader.
  FileLineChunks(const std::string& path, std::size_t target_bytes, std::size_t max_line_bytes, std::size_t padding);
  ~FileLineChunks();
  FileLineChunks(const FileLineChunks&) = delete;
  FileLineChunks& operator=(const FileLineChunks&) = delete;

  bool ok() const { return fd_ >= 0; }
  // Chunks of the file as it was when opened: ceil(size / target). Some may
  // be empty (inside a long line).
  std::uint64_t count() const { return (size_ + target_bytes_ - 1) / target_bytes_; }
  // Chunk `index` (< count()) into `chunk`: kChunk, kLineTooLong (its last
  // line runs on more than max_line_bytes past its nominal end) or
  // kStreamError (a read failed, or the file shrank since it was opened).
  LineChunks::Status read(std::uint64_t index, ChunkText& chunk) const;

 private:
  int fd_ = -1;
  std::uint64_t size_ = 0;
  std::size_t target_bytes_;
  std::size_t max_line_bytes_;
  std::size_t padding_;
};

// True when `text` holds only JSON whitespace (a chunk with no value).
bool is_blank_json(std::string_view text);

}  // namespace tailscope::trace
