#include "trace/line_chunks.h"

#include <cstring>

namespace tailscope::trace {

LineChunks::LineChunks(GzipReadStream& stream, std::size_t target_bytes, std::size_t max_line_bytes)
    : stream_(stream), target_bytes_(target_bytes), max_line_bytes_(max_line_bytes) {}

bool LineChunks::fill(std::size_t want) {
  while (pending_.size() < want) {
    const std::size_t had = pending_.size();
    pending_.resize(want);
    const std::size_t got = stream_.read(pending_.data() + had, want - had);
    pending_.resize(had + got);
    if (got == 0) return false;
  }
  return true;
}

LineChunks::Status LineChunks::next(std::string& chunk, std::uint64_t* offset) {
  std::size_t want = target_bytes_;
  for (;;) {
    const bool more = fill(want);
    if (!stream_.ok()) return Status::kStreamError;
    std::size_t cut = pending_.size();
    if (more) {
      // The last newline of what is buffered: the chunk is whole lines.
      const void* last = memrchr(pending_.data(), '\n', pending_.size());
      if (last == nullptr) {
        if (pending_.size() >= max_line_bytes_) return Status::kLineTooLong;
        want = std::min(pending_.size() * 2, max_line_bytes_);
        continue;
      }
      cut = static_cast<const char*>(last) - pending_.data() + 1;
    }
    if (cut == 0) return Status::kEnd;
    chunk.assign(pending_, 0, cut);
    pending_.erase(0, cut);
    *offset = offset_;
    offset_ += cut;
    return Status::kChunk;
  }
}

bool is_blank_json(std::string_view text) {
  for (char c : text) {
    if (c != ' ' && c != '\n' && c != '\r' && c != '\t') return false;
  }
  return true;
}

}  // namespace tailscope::trace
