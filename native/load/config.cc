#include "load/config.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace tailscope::load {
namespace {

double parse_number_prefix(std::string_view text, size_t* used) {
  std::string s(text);
  if (s.empty() || !(std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '.')) {
    throw std::invalid_argument("'" + s + "' is not a number");
  }
  double v = std::stod(s, used);
  if (!std::isfinite(v) || v < 0) throw std::invalid_argument("'" + s + "' is not a finite non-negative number");
  return v;
}

}  // namespace

double parse_si_number(std::string_view text) {
  size_t used = 0;
  double v = parse_number_prefix(text, &used);
  std::string_view suffix = text.substr(used);
  if (suffix.empty()) return v;
  if (suffix == "k" || suffix == "K") return v * 1e3;
  if (suffix == "M" || suffix == "m") return v * 1e6;
  if (suffix == "G" || suffix == "g") return v * 1e9;
  throw std::invalid_argument("'" + std::string(text) + "': unknown suffix '" + std::string(suffix) + "' (k, M or G)");
}

double parse_duration_s(std::string_view text) {
  size_t used = 0;
  double v = parse_number_prefix(text, &used);
  std::string_view unit = text.substr(used);
  if (unit.empty() || unit == "s") return v;
  if (unit == "ms") return v / 1e3;
  if (unit == "us") return v / 1e6;
  if (unit == "m") return v * 60;
  if (unit == "h") return v * 3600;
  throw std::invalid_argument("'" + std::string(text) + "': unknown time unit '" + std::string(unit) + "' (us, ms, s, m, h)");
}

}  // namespace tailscope::load
