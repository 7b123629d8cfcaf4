#include "trace/gzip_read_stream.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tailscope::trace {

GzipReadStream::GzipReadStream(const std::string& path) : buffer_(new Ch[kBufferBytes + 1]) {
  current_ = last_ = buffer_.get();
  *current_ = '\0';
  int fd = path == "-" ? dup(STDIN_FILENO) : open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    error_ = std::strerror(errno);
    eof_ = true;
    return;
  }
  struct stat st {};
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) size_at_open_ = st.st_size;
  fd_ = fd;
  file_ = gzdopen(fd, "rb");
  if (file_ == nullptr) {
    close(fd);
    error_ = "cannot start zlib reader";
    eof_ = true;
    return;
  }
  gzbuffer(file_, kBufferBytes);
  refill();
  compressed_ = gzdirect(file_) == 0;
}

std::optional<std::pair<std::uint64_t, std::uint64_t>> GzipReadStream::shrunk_since_open() const {
  struct stat st {};
  if (size_at_open_ < 0 || file_ == nullptr || fstat(fd_, &st) != 0 || st.st_size >= size_at_open_) return std::nullopt;
  return std::make_pair(static_cast<std::uint64_t>(size_at_open_), static_cast<std::uint64_t>(st.st_size));
}

GzipReadStream::~GzipReadStream() {
  if (file_ != nullptr) gzclose(file_);
}

void GzipReadStream::refill() {
  if (eof_) return;
  consumed_ += read_count_;
  const int n = gzread(file_, buffer_.get(), static_cast<unsigned>(kBufferBytes));
  read_count_ = n > 0 ? static_cast<std::size_t>(n) : 0;
  current_ = buffer_.get();
  if (n < 0 || read_count_ < kBufferBytes) {
    // A short read means end of input or an error; zlib reports a truncated
    // gzip member as Z_BUF_ERROR only here, after the data it could inflate.
    int code = Z_OK;
    const char* message = gzerror(file_, &code);
    if (code != Z_OK && code != Z_STREAM_END) {
      error_ = std::string("gzip: ") + (message != nullptr ? message : "read error");
    } else if (n < 0) {
      error_ = "read error";
    }
    buffer_[read_count_] = '\0';
    last_ = buffer_.get() + read_count_;
    eof_ = true;
    return;
  }
  last_ = buffer_.get() + read_count_ - 1;
}

}  // namespace tailscope::trace
