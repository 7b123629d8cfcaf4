// Finds where a JSON object or array ends without parsing it: the reader cuts
// a top-level value it reads alone out this way (one the buffered window cuts
// off, one simdjson gave up on with others, an envelope's elements) and hands
// it to simdjson, whose On-Demand parser needs the whole value in memory; and
// finds where the last value read with others (iterate_many) ends. Strings
// (and escapes inside them) are tracked so brackets in names do not count.
// Nothing else is validated here: the parser does that.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tailscope::trace::internal {

class ValueScanner {
 public:
  enum class Status : std::uint8_t { kNeedMore, kComplete, kTooDeep };

  // Starts at the value's opening bracket; or, with depth > 0, inside that
  // many open containers (outside any string): the scan ends where they close.
  explicit ValueScanner(int max_depth, int depth = 0) : max_depth_(max_depth), depth_(depth) {}

  // Scans data[from, size) (data[0] is the opening bracket, so the first call
  // passes from = 0). kComplete: the value ends at end() (one past its closing
  // bracket). kNeedMore: call again with more data, from = size of this call.
  // kTooDeep: nesting passed max_depth; the slow path reports it exactly.
  Status scan(const char* data, std::size_t from, std::size_t size);
  std::size_t end() const { return end_; }

 private:
  Status scan_scalar(const char* data, std::size_t from, std::size_t to);

  int max_depth_;
  int depth_ = 0;
  bool in_string_ = false;
  bool escaped_ = false;  // the previous byte was a backslash inside a string
  std::size_t end_ = 0;
};

}  // namespace tailscope::trace::internal
