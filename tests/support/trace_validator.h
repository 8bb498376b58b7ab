// Checks a Chrome trace against the rules its consumers (Perfetto, chrome://tracing, the
// TensorBoard plugin, HTA, Chakra) impose, as collected in shared/docs/formats.md §2 and §5.
// Violations come back as readable strings so a failing test can print all of them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace tprof::test {

// Keys keep their file order (the top-level key-order rule needs it) and numbers are long
// double: its 64-bit mantissa represents every "<µs>.<3-digit ns>" value of a trace exactly
// enough to recover integer nanoseconds, which a double cannot guarantee near 8e12 µs.
using TraceJson = nlohmann::basic_json<nlohmann::ordered_map, std::vector, std::string, bool,
                                       std::int64_t, std::uint64_t, long double>;

// The file's text, inflated when it starts with the gzip magic bytes. Throws
// std::runtime_error when the file cannot be read or the gzip stream is corrupt or truncated.
std::string read_trace_text(const std::filesystem::path& path);

// Every consumer rule the JSON document violates; empty means valid.
std::vector<std::string> validate_trace_text(const std::string& text);

// validate_trace_text plus the file-level rules: the file is readable, and a ".gz" name holds
// gzip data while any other name holds plain JSON. I/O errors are reported as violations.
std::vector<std::string> validate_trace_file(const std::filesystem::path& path);

// Every rule of PARAM's et_replay and Chakra that the Execution Trace's node values break
// (shared/docs/formats.md §3.4, §5): the four arrays of inputs and outputs run in parallel, each
// value has the form convertIValue gives its type (an "Int" is an integer, a "Device" a string,
// a "GenericList[...]" a list of that many elements...), since et_replay hands values straight
// to torch; and no value is the placeholder "<Unknown>" of type "Unknown", which torch never
// writes. Empty means valid.
std::vector<std::string> validate_execution_trace(const nlohmann::json& et);

// Parses a trace file (plain or gzip). Throws on I/O or JSON errors.
TraceJson load_trace(const std::filesystem::path& path);

using NameCounts = std::map<std::string, std::size_t>;

// How often each name occurs among the complete ("X") events of one category, e.g. cpu_op.
NameCounts complete_event_name_counts(const TraceJson& trace, std::string_view category);

}  // namespace tprof::test
