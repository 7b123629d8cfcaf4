// Reads a file or stdin in chunks through zlib's gzread: gzip-compressed and
// plain input alike (zlib passes non-gzip input through unchanged), into the
// caller's buffer, so memory does not grow with the file. Plain reads, never
// a mapping: a file that shrinks under us ends early instead of raising SIGBUS.
#pragma once

#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace tailscope::trace {

class GzipReadStream {
 public:
  // zlib's own input buffer: one read(2) per this many compressed bytes.
  static constexpr std::size_t kBufferBytes = 256 * 1024;

  // `path` "-" reads stdin. Check ok() / error() after construction.
  explicit GzipReadStream(const std::string& path);
  ~GzipReadStream();
  GzipReadStream(const GzipReadStream&) = delete;
  GzipReadStream& operator=(const GzipReadStream&) = delete;

  bool ok() const { return error_.empty(); }
  // Set when opening failed or zlib reported an error (corrupt or truncated
  // gzip data); the stream then behaves as if it had ended.
  const std::string& error() const { return error_; }
  bool compressed() const { return compressed_; }
  // For a regular file whose size went down since it was opened (another
  // process truncated it while we read): {size when opened, size now}.
  std::optional<std::pair<std::uint64_t, std::uint64_t>> shrunk_since_open() const;

  // Reads up to `max` decompressed bytes into `dst`; 0 at the end of input
  // (or after an error).
  std::size_t read(char* dst, std::size_t max);
  bool at_end() const { return eof_; }
  // Regular files can be read again from the start (rewind()); pipes cannot.
  bool rewindable() const { return size_at_open_ >= 0 && file_ != nullptr; }
  // Starts over at the first byte (the reader re-reads a value whose fast
  // parse gave up after its start left the buffer). False when it cannot.
  bool rewind();

 private:
  gzFile file_ = nullptr;
  int fd_ = -1;                     // owned by file_
  std::int64_t size_at_open_ = -1;  // regular files only
  bool eof_ = false;
  bool compressed_ = false;
  std::string error_;
};

}  // namespace tailscope::trace
