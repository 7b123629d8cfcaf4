#include "load/config.h"

#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>

namespace tailscope::load {
namespace {

bool starts_like_a_number(std::string_view s) {
  return !s.empty() && (std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '.');
}

double parse_number_prefix(std::string_view text, size_t* used) {
  std::string s(text);
  if (!s.empty() && s[0] == '-' && starts_like_a_number(std::string_view(s).substr(1))) {
    // A number, only a negative one: say so rather than "not a number".
    throw std::invalid_argument("'" + s + "' is negative; must be ≥ 0");
  }
  if (!starts_like_a_number(s)) throw std::invalid_argument("'" + s + "' is not a number");
  double v = 0;
  try {
    v = std::stod(s, used);
  } catch (const std::out_of_range&) {
    throw std::invalid_argument("'" + s + "' is out of range");
  }
  // std::stod also reads hexadecimal ("0x10" is 16): a typed count or rate is decimal only.
  for (size_t i = 0; i < *used; ++i) {
    const char c = s[i];
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-')) {
      throw std::invalid_argument("'" + s + "' is not a decimal number");
    }
  }
  if (!std::isfinite(v) || v < 0) throw std::invalid_argument("'" + s + "' is not a finite non-negative number");
  return v;
}

// A value after a suffix or unit was applied (1e308G is inf).
double finite(double v, std::string_view text) {
  if (!std::isfinite(v)) throw std::invalid_argument("'" + std::string(text) + "' is out of range");
  return v;
}

[[noreturn]] void bad_option(std::string_view option, std::string_view text, const std::string& what) {
  throw std::invalid_argument(std::string(option) + ": '" + std::string(text) + "' " + what);
}

// Rethrows a parser's message with the option in front.
template <class F>
double with_option(std::string_view option, F&& parse) {
  try {
    return parse();
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string(option) + ": " + e.what());
  }
}

std::string format_number(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

}  // namespace

LoadIo parse_load_io(std::string_view text) {
  if (text == "auto") return LoadIo::kAuto;
  if (text == "uring") return LoadIo::kUring;
  if (text == "epoll") return LoadIo::kEpoll;
  throw std::invalid_argument("--io: '" + std::string(text) + "' is none of auto, uring, epoll");
}

std::string_view to_string(LoadIo io) {
  switch (io) {
    case LoadIo::kUring:
      return "uring";
    case LoadIo::kEpoll:
      return "epoll";
    case LoadIo::kAuto:
      break;
  }
  return "auto";
}

double parse_si_number(std::string_view text) {
  size_t used = 0;
  double v = parse_number_prefix(text, &used);
  std::string_view suffix = text.substr(used);
  if (suffix.empty()) return v;
  if (suffix == "k" || suffix == "K") return finite(v * 1e3, text);
  if (suffix == "M" || suffix == "m") return finite(v * 1e6, text);
  if (suffix == "G" || suffix == "g") return finite(v * 1e9, text);
  throw std::invalid_argument("'" + std::string(text) + "': unknown suffix '" + std::string(suffix) + "' (k, M or G)");
}

double parse_duration_s(std::string_view text) {
  size_t used = 0;
  double v = parse_number_prefix(text, &used);
  std::string_view unit = text.substr(used);
  if (unit.empty() || unit == "s") return v;
  if (unit == "ms") return v / 1e3;
  if (unit == "us") return v / 1e6;
  if (unit == "m") return finite(v * 60, text);
  if (unit == "h") return finite(v * 3600, text);
  throw std::invalid_argument("'" + std::string(text) + "': unknown time unit '" + std::string(unit) +
                              "' (us, ms, s, m, h)");
}

int64_t parse_count(std::string_view option, std::string_view text, int64_t min, int64_t max) {
  const double v = with_option(option, [&] { return parse_si_number(text); });
  std::string range = "(";  // appended, not "(" + ...: gcc 12 misreports operator+ chains (-Wrestrict)
  range.append(std::to_string(min)).append(" … ").append(std::to_string(max)).append(")");
  if (v != std::floor(v)) bad_option(option, text, "is not an integer " + range);
  if (v < static_cast<double>(min) || v > static_cast<double>(max))
    bad_option(option, text, "is out of range " + range);
  return static_cast<int64_t>(v);
}

double parse_number_in(std::string_view option, std::string_view text, double min, double max) {
  const double v = with_option(option, [&] {
    size_t used = 0;
    const double n = parse_number_prefix(text, &used);
    if (used != text.size()) throw std::invalid_argument("'" + std::string(text) + "' is not a number");
    return n;
  });
  if (v < min || v > max)
    bad_option(option, text, "is out of range (" + format_number(min) + " … " + format_number(max) + ")");
  return v;
}

double parse_duration_in(std::string_view option, std::string_view text, double min_s, double max_s) {
  const double v = with_option(option, [&] { return parse_duration_s(text); });
  if (v < min_s || v > max_s)
    bad_option(option, text, "is out of range (" + format_number(min_s) + " s … " + format_number(max_s) + " s)");
  return v;
}

double parse_rate_per_s(std::string_view option, std::string_view text) {
  const double v = with_option(option, [&] { return parse_si_number(text); });
  if (v > kMaxRatePerS) bad_option(option, text, "is out of range (0 = closed loop, or up to 100M requests/s)");
  return v;
}

void check_load_config(const LoadConfig& config) {
  if (config.open_loop() && config.rate_per_s * config.duration_s < 1.0)
    throw std::invalid_argument("-R " + format_number(config.rate_per_s) + " with -d " +
                                format_number(config.duration_s) + "s intends " +
                                format_number(config.rate_per_s * config.duration_s) +
                                " requests in the measured window; give -R and -d with R × d ≥ 1");
}

}  // namespace tailscope::load
