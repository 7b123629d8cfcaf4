// The engine side of the engine/driver contract: one JSON result document per
// run (docs/formats.md), written atomically so a crash never leaves half a file.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace tailscope {

inline constexpr std::string_view kResultSchema = "tailscope.result/1";

// Writes `text` to `path` via a temp file in the same directory + fsync +
// rename(2), so readers see either the old file or the whole new one.
// Throws std::runtime_error naming the path and errno text on failure
// (unwritable folder, full disk); the temp file is removed in that case.
void write_file_atomic(const std::string& path, std::string_view text);

// Dumps `doc` (pretty, 2 spaces) to `path` atomically, or to stdout if path is "" or "-".
void write_result(const nlohmann::json& doc, const std::string& path);

// Starts a result document with the fields every engine fills the same way:
// schema, engine name and version, start time, machine facts, and the command line.
nlohmann::json new_result_document(std::string_view engine, int argc, char** argv);

// Progress for the driver's bars: one JSON object per line on stderr.
void emit_progress(std::string_view engine, std::string_view phase, double fraction_done,
                   const nlohmann::json& extra = nlohmann::json::object());

// Creates `dir` and parents if missing; throws std::runtime_error on failure.
void ensure_directory(const std::string& dir);

}  // namespace tailscope
