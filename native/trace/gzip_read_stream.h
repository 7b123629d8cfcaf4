// A RapidJSON input stream over zlib's gzread: reads gzip-compressed and plain
// files alike (zlib passes non-gzip input through unchanged), in fixed-size
// chunks, so memory does not grow with the file. Plain reads, never a
// mapping: a file that shrinks under us ends early instead of raising SIGBUS.
#pragma once

#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

namespace tailscope::trace {

class GzipReadStream {
 public:
  using Ch = char;
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
  // True at the real end of input (Peek() is also '\0' at a NUL byte).
  bool at_end() const { return eof_ && current_ == last_; }

  // RapidJSON stream concept. '\0' marks the end of input.
  Ch Peek() const { return *current_; }
  Ch Take() {
    const Ch c = *current_;
    advance();
    return c;
  }
  // Offset in the (decompressed) input.
  std::size_t Tell() const { return consumed_ + static_cast<std::size_t>(current_ - buffer_.get()); }
  Ch* PutBegin() { return nullptr; }
  void Put(Ch) {}
  void Flush() {}
  std::size_t PutEnd(Ch*) { return 0; }

 private:
  void advance() {
    if (current_ < last_) {
      ++current_;
    } else {
      refill();
    }
  }
  void refill();

  gzFile file_ = nullptr;
  int fd_ = -1;                     // owned by file_
  std::int64_t size_at_open_ = -1;  // regular files only
  std::unique_ptr<Ch[]> buffer_;
  Ch* current_ = nullptr;
  Ch* last_ = nullptr;          // last valid byte (or the '\0' sentinel at end)
  std::size_t consumed_ = 0;    // bytes of earlier buffers
  std::size_t read_count_ = 0;  // bytes in the current buffer
  bool eof_ = false;
  bool compressed_ = false;
  std::string error_;
};

}  // namespace tailscope::trace
