// RapidJSON input stream over a '\0'-terminated buffer (text in memory), parsed
// in "in situ" mode but with decoded strings written to a separate scratch
// buffer instead of over the input: the input can stay read-only, and the
// parser keeps both cursors in registers (copyOptimization), which makes
// this RapidJSON's fastest way to read a file — about 3x its buffered file
// stream. The scratch buffer must hold the longest string plus its '\0':
// input size + 1 always does.
#pragma once

#include <rapidjson/reader.h>

#include <cstddef>

namespace tailscope::trace::internal {

class ScratchStream {
 public:
  using Ch = char;
  ScratchStream(const char* text, char* scratch) : src_(text), head_(text), dst_(scratch), scratch_(scratch) {}
  Ch Peek() const { return *src_; }
  Ch Take() { return *src_++; }
  std::size_t Tell() const { return static_cast<std::size_t>(src_ - head_); }
  // Every string is decoded from the scratch buffer's start; the handler
  // copies what it keeps before the next string.
  Ch* PutBegin() { return dst_ = scratch_; }
  void Put(Ch c) { *dst_++ = c; }
  std::size_t PutEnd(Ch* begin) { return static_cast<std::size_t>(dst_ - begin); }
  void Flush() {}

 private:
  const char* src_;
  const char* head_;
  char* dst_;
  char* scratch_;
};

}  // namespace tailscope::trace::internal

namespace rapidjson {
template <>
struct StreamTraits<tailscope::trace::internal::ScratchStream> {
  enum { copyOptimization = 1 };
};
}  // namespace rapidjson
