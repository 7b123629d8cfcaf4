#include "analyze/pretty_json.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>

#include "trace/trace.h"

namespace tailscope::analyze {

namespace {

// Bytes a string copies as they are: printable ASCII but the quote and the
// backslash (the others are looked at one by one).
constexpr std::array<bool, 256> kPlainStringBytes = [] {
  std::array<bool, 256> plain{};
  for (int c = 0x20; c < 0x80; ++c) plain[static_cast<std::size_t>(c)] = c != '"' && c != '\\';
  return plain;
}();

// A recursive copy of the writer's grammar; any byte it does not expect
// stops it (false), and the caller takes nlohmann's round trip instead. It
// writes through a pointer into `out`, grown ahead of each token: the text
// is mostly short tokens, each on its own indented line, and a std::string
// append per piece was most of the printer's instructions.
class PrettyPrinter {
 public:
  PrettyPrinter(std::string_view in, int indent, std::string& out)
      : in_(in), indent_(static_cast<std::size_t>(indent)), out_(out), begin_(out.size()) {
    // Compact text grows by a newline and its indentation per token.
    grow(in.size() * 2 + 64);
  }

  // True with the text printed (`out` cut to it); false with `out` as it was.
  bool print(int depth) {
    const bool ok = value(depth) && at_ == in_.size();
    out_.resize(ok ? static_cast<std::size_t>(to_ - out_.data()) : begin_);
    return ok;
  }

 private:
  // Deeper than this goes to the round trip (the writer nests a handful of
  // levels); it bounds the recursion on any input.
  static constexpr int kMaxDepth = 64;

  bool more() const { return at_ < in_.size(); }
  char peek() const { return in_[at_]; }

  // Room for n more bytes at to_.
  void room(std::size_t n) {
    if (static_cast<std::size_t>(end_ - to_) < n) [[unlikely]]
      grow(n);
  }
  void grow(std::size_t n) {
    const std::size_t used = to_ == nullptr ? out_.size() : static_cast<std::size_t>(to_ - out_.data());
    // At least the input's size more each time: a few grows a value, and
    // std::string doubles its capacity underneath.
    out_.resize(used + std::max(n, in_.size()) + 64);
    to_ = out_.data() + used;
    end_ = out_.data() + out_.size();
  }
  void put(char c) {
    room(1);
    *to_++ = c;
  }
  void put(std::string_view text) {
    room(text.size());
    std::memcpy(to_, text.data(), text.size());
    to_ += text.size();
  }
  void new_line(int depth) {
    const std::size_t pad = static_cast<std::size_t>(depth) * indent_;
    room(pad + 1);
    *to_++ = '\n';
    std::memset(to_, ' ', pad);
    to_ += pad;
  }

  bool value(int depth) {
    if (!more() || depth > kMaxDepth) return false;
    switch (peek()) {
      case '{':
        return object(depth);
      case '[':
        return array(depth);
      case '"':
        return string();
      case 't':
        return literal("true");
      case 'f':
        return literal("false");
      case 'n':
        return literal("null");
      default:
        return integer();
    }
  }

  // dump(): "{}" when empty, else "{\n", each member on its own line one
  // level deeper as "key": value, ",\n" between them, "\n" and "}" at this
  // level. Arrays the same with "[" and "]".
  bool object(int depth) {
    ++at_;
    if (more() && peek() == '}') {
      ++at_;
      put("{}");
      return true;
    }
    put('{');
    for (;;) {
      new_line(depth + 1);
      if (!more() || peek() != '"' || !string()) return false;
      if (!more() || peek() != ':') return false;
      ++at_;
      put(": ");
      if (!value(depth + 1) || !more()) return false;
      const char c = in_[at_++];
      if (c == ',') {
        put(',');
        continue;
      }
      if (c != '}') return false;
      new_line(depth);
      put('}');
      return true;
    }
  }

  bool array(int depth) {
    ++at_;
    if (more() && peek() == ']') {
      ++at_;
      put("[]");
      return true;
    }
    put('[');
    for (;;) {
      new_line(depth + 1);
      if (!value(depth + 1) || !more()) return false;
      const char c = in_[at_++];
      if (c == ',') {
        put(',');
        continue;
      }
      if (c != ']') return false;
      new_line(depth);
      put(']');
      return true;
    }
  }

  static bool lower_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }
  static int hex_value(char c) { return c <= '9' ? c - '0' : c - 'a' + 10; }

  // Copied whole when the round trip would print the same bytes: the parse
  // undoes the escapes and dump() writes these very escapes back.
  bool string() {
    const std::size_t begin = at_++;
    bool non_ascii = false;
    for (;;) {
      while (more() && kPlainStringBytes[static_cast<unsigned char>(peek())]) ++at_;
      if (!more()) return false;  // unterminated
      const auto c = static_cast<unsigned char>(peek());
      if (c == '"') {
        ++at_;
        const std::string_view text = in_.substr(begin, at_ - begin);
        // Escapes are ASCII, so the text is valid UTF-8 when its raw bytes are.
        if (non_ascii && !trace::is_valid_utf8(text)) return false;
        put(text);
        return true;
      }
      if (c < 0x20) return false;  // a raw control character: the parser refuses it
      if (c >= 0x80) {
        non_ascii = true;
        ++at_;
        continue;
      }
      // A backslash.
      if (at_ + 1 >= in_.size()) return false;
      switch (in_[at_ + 1]) {
        case '"':
        case '\\':
        case 'b':
        case 'f':
        case 'n':
        case 'r':
        case 't':
          at_ += 2;
          continue;
        case 'u': {
          // dump() writes \u00xx (lower case) for the control characters
          // without a short escape, and no other \u.
          if (at_ + 6 > in_.size() || in_[at_ + 2] != '0' || in_[at_ + 3] != '0') return false;
          const char h = in_[at_ + 4], l = in_[at_ + 5];
          if ((h != '0' && h != '1') || !lower_hex(l)) return false;
          const int code = hex_value(h) * 16 + hex_value(l);
          if (code == '\b' || code == '\f' || code == '\n' || code == '\r' || code == '\t') return false;
          at_ += 6;
          continue;
        }
        default:
          return false;  // "\/" and anything else: printed otherwise by dump()
      }
    }
  }

  bool literal(std::string_view word) {
    if (in_.substr(at_, word.size()) != word) return false;
    at_ += word.size();
    put(word);
    return true;
  }

  // An integer the parser keeps as an int64 or uint64 (which dump() prints
  // as it reads): no fraction or exponent (a double is printed its own way),
  // no leading zero, no "-0" (printed "0"), and few enough digits to fit.
  bool integer() {
    const std::size_t begin = at_;
    const bool negative = peek() == '-';
    if (negative) ++at_;
    const std::size_t digits_begin = at_;
    while (more() && peek() >= '0' && peek() <= '9') ++at_;
    const std::size_t digits = at_ - digits_begin;
    if (digits == 0) return false;
    if (in_[digits_begin] == '0' && (digits > 1 || negative)) return false;
    if (digits > (negative ? 18u : 19u)) return false;  // a bound short of the types' limits
    if (more() && (peek() == '.' || peek() == 'e' || peek() == 'E')) return false;
    put(in_.substr(begin, at_ - begin));
    return true;
  }

  std::string_view in_;
  std::size_t at_ = 0;
  std::size_t indent_;
  std::string& out_;
  std::size_t begin_;  // out_'s size before
  char* to_ = nullptr;
  char* end_ = nullptr;
};

}  // namespace

bool append_pretty_json(std::string_view compact, int indent, int depth, std::string& out) {
  return PrettyPrinter(compact, indent, out).print(depth);
}

void append_pretty_json_or_reparse(std::string_view compact, int indent, int depth, std::string& out) {
  if (append_pretty_json(compact, indent, depth, out)) return;
  const nlohmann::ordered_json value = nlohmann::ordered_json::parse(compact);
  append_nested(value.dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace), indent, depth, out);
}

void append_nested(std::string_view dumped, int indent, int depth, std::string& out) {
  const std::size_t pad = static_cast<std::size_t>(depth) * static_cast<std::size_t>(indent);
  for (std::size_t at = 0; at < dumped.size();) {
    std::size_t line_end = dumped.find('\n', at);
    if (line_end == std::string_view::npos) {
      out.append(dumped.substr(at));
      return;
    }
    out.append(dumped.substr(at, line_end + 1 - at));
    out.append(pad, ' ');
    at = line_end + 1;
  }
}

}  // namespace tailscope::analyze
