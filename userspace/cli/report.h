// `tprof report TRACE[.json|.gz]`: the end-of-run table from a saved Chrome trace, tprof's or
// torch.profiler's own (torch 2.x's object with traceEvents, or torch 1.13's export_chrome_trace
// array of events): every cpu_op and user_annotation (every complete event, in torch 1.13's
// array, which names no cat), its self time being its duration less that of the ranges
// directly inside it on its thread; and where the trace has CPU [memory] events
// (profile_memory=True, tprof --memory), its CPU Mem and Self CPU Mem from those on its thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "userspace/cli/op_summary.h"

namespace tprof {

// What a trace may hold before `tprof report` stops with an error rather than use unbounded
// memory or time. The text is streamed, never held whole; what stays in memory is 32 bytes per
// counted range (the vectors may hold twice that while they grow) plus the distinct names,
// shapes and threads.
struct ReportLimits {
  size_t max_depth = 64;                         // arrays and objects inside one another
  size_t max_token_bytes = size_t{1} << 20;      // a string or number, or the text between two; Input Dims
  uint64_t max_inflated_bytes = uint64_t{32} << 30;  // the text, after gunzip: a bound on time only
  size_t max_ranges = size_t{1} << 24;           // counted events: 512 MiB of ranges
  size_t max_distinct_bytes = size_t{256} << 20; // distinct names, shapes and threads, 64 bytes each extra
};

// Microseconds a ts or dur may have: their nanoseconds, and their sum, fit an int64.
constexpr double kMaxTraceMicroseconds = 4e15;

// Throws tprof::Error, one line naming the file (and the event, or the byte), when the file
// cannot be read, is not a Chrome trace, has an event whose fields have the wrong type, or goes
// past a limit.
// With `compile_summary`, the same pass also gives what compile_summary_from_trace does.
OperatorTotalsTable totals_from_trace(const std::string& path, bool group_by_shape, const ReportLimits& limits = {},
                                      std::vector<std::string>* compile_summary = nullptr);

// `tprof report --compile`: the torch.compile summary (compile_summary.h) of a saved trace,
// tprof's or torch.profiler's, from its ranges' names and nesting and its python_function
// events; no line when it holds no compiled region. Ops carry no Python stack in a trace, so
// no first caller and no line of an eager op is given. Throws tprof::Error as totals_from_trace.
std::vector<std::string> compile_summary_from_trace(const std::string& path, const ReportLimits& limits = {});

// `tprof report --memory`: what a trace tprof recorded with --memory says of memory
// (tprof_summary.memory: the counts, the peak, its holders, and in a --schedule cycle what earlier
// cycles left live), as text for the console. The events are read past, one at a time. Throws
// tprof::Error when the file cannot be read, is not JSON, or has no memory summary.
std::string memory_report_from_trace(const std::string& path, const ReportLimits& limits = {});

}  // namespace tprof
