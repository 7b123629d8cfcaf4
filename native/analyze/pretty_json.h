// The per-trace results the result document keeps ("traces") are the compact
// JSON text TraceAnalysisJsonWriter wrote for the artifacts. The document is
// printed by nlohmann::ordered_json::dump(2); parsing each result into a
// nlohmann value only to print it again was most of a small run's
// instructions (callgrind, 20 000 spans: ~190 M of the engine's 355 M; see
// docs/critical-path.md, "Performance"). These functions print the text as
// that parse-and-dump would, without building values.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace tailscope::analyze {

// Appends `compact` — one JSON value with no whitespace — to `out` exactly as
// nlohmann::ordered_json::parse(compact).dump(indent, ' ', false,
// error_handler_t::replace) prints it, nested `depth` levels deep (every line
// after the first indented by depth x indent more spaces), and returns true.
// It copies only what that round trip leaves as it is: objects, arrays,
// true/false/null, integers in canonical form that fit an int64 or uint64,
// and strings whose escapes are the ones dump() writes (\" \\ \b \f \n \r \t,
// \u00xx in lower case for the other control characters) and whose other
// bytes are valid UTF-8. Anything else (a fraction or exponent, whitespace,
// "\/", "\u0041", "-0", invalid text) returns false with `out` unchanged: the
// caller then takes the round trip. Object keys are not checked for
// repeats (the writer never repeats one; the round trip would keep the last
// value at the first one's place).
bool append_pretty_json(std::string_view compact, int indent, int depth, std::string& out);

// Appends `compact` (any JSON text) as above: append_pretty_json, or the
// round trip through nlohmann when that declines (which throws on invalid
// JSON, as parsing it always did).
void append_pretty_json_or_reparse(std::string_view compact, int indent, int depth, std::string& out);

// Appends `dumped` (the output of dump(indent, ...)) nested `depth` levels
// deep: a dumped string holds no raw newline, so every '\n' starts a line.
void append_nested(std::string_view dumped, int indent, int depth, std::string& out);

}  // namespace tailscope::analyze
