// A regular file mapped read-only with a '\0' after its last byte, so
// RapidJSON can parse it from memory, plus a scratch buffer as large as the
// file for decoded strings (reserved, not committed: only the pages the
// longest string touches become resident). Resident memory stays bounded:
// ReleaseBefore() drops the pages already parsed.
#pragma once

#include <cstddef>
#include <string>

namespace tailscope::trace {

class MappedFile {
 public:
  MappedFile() = default;
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  // False (with error()) when the file cannot be opened or mapped.
  bool Open(int fd, std::size_t size);
  const std::string& error() const { return error_; }
  const char* data() const { return data_; }  // data()[size()] == '\0'
  std::size_t size() const { return size_; }
  char* scratch() const { return scratch_; }  // size() + 1 writable bytes
  // Gives the pages wholly before `offset` back to the kernel (call only
  // where no pointer into them is live: between traces).
  void ReleaseBefore(std::size_t offset);

 private:
  char* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t mapped_bytes_ = 0;
  char* scratch_ = nullptr;
  std::size_t scratch_bytes_ = 0;
  std::size_t released_ = 0;
  std::string error_;
};

}  // namespace tailscope::trace
