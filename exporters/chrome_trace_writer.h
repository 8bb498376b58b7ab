// Writes the model as a Kineto-compatible Chrome trace (../shared/docs/formats.md §2, §5):
// Kineto's top-level key order, relative microsecond timestamps with 3 decimals against a
// 3-month-floored baseTimeNanoseconds, process/thread metadata, cpu_op and user_annotation
// slices.
#pragma once

#include <cstdint>
#include <string>

#include "exporters/output_file.h"
#include "model/trace_model.h"

namespace tprof::exporters {

// Kineto's ChromeTraceBaseTime: unix ns floored to a 7,889,238-second quantum.
uint64_t chrome_trace_base_time_ns(uint64_t unix_ns);

// "<int us>.<3-digit ns>" of a non-negative ns offset; negative offsets clamp to "0.000".
std::string format_relative_us(int64_t offset_ns);

// `trace_name` goes into the top-level "traceName" (the output file's base name).
// baseTimeNanoseconds derives from the window start. X events come out one per line, merged
// across threads by start time, which needs each ThreadTrack::spans and Trace::annotations
// sorted by start as the model promises. Does not commit `out`.
void write_chrome_trace(const model::Trace& trace, const std::string& trace_name, OutputFile& out);

}  // namespace tprof::exporters
