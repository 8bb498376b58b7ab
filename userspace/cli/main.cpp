// tprof command line.
#include <CLI/CLI.hpp>

#include <sys/types.h>

#include <cstdio>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "exporters/partial_recovery.h"
#include "userspace/session/attach_session.h"
#include "userspace/cli/error.h"

namespace {

constexpr const char* kDescription =
    "tprof: torch.profiler for a running PyTorch process, from outside it.\n"
    "Attaches eBPF uprobes to every ATen op of an unmodified process (no import, no env var,\n"
    "no restart), walks the Python stack of each op, and writes a Kineto-compatible Chrome\n"
    "trace that opens in Perfetto (ui.perfetto.dev), chrome://tracing, HTA and TensorBoard.\n"
    "A Python process without torch gets its python_function timeline from stack samples.";

constexpr const char* kAttachFooter =
    "\nExamples:\n"
    "  sudo tprof attach 12345 --duration 20            # 20 s, default file name\n"
    "  sudo tprof attach 12345 -o step.pt.trace.json.gz # until Ctrl-C, gzip output\n"
    "                                                   # (and step.et.json.gz)\n"
    "\nRecording stops at --duration, on Ctrl-C/SIGTERM, or when the target exits; whatever\n"
    "was recorded is then written. Events the ring buffer could not hold are counted and\n"
    "reported (raise --buffer-mb if any are dropped).\n"
    "\nLike torch.profiler with record_shapes=True, each op carries its inputs' shapes, dtypes\n"
    "and strides and the ints and bools among them (reported as unknown where they are out of\n"
    "reach, e.g. floats passed in xmm registers); --no-shapes leaves them out. record_function()\n"
    "ranges appear as user_annotation events and the autograd engine's backward nodes as\n"
    "cpu_op events, as torch's profiler shows them.\n"
    "\nA PyTorch Execution Trace (schema 1.1.1-chakra.0.0.4, for Chakra and PARAM) is written\n"
    "beside the trace, linked to it by rf_id == \"Record function id\". Its name ends in\n"
    ".et.json, not .pt.trace.json, so that TensorBoard does not load it as a second trace; but\n"
    "HTA's TraceAnalysis(trace_dir=...) reads every .json/.gz in a directory and may take the ET\n"
    "for the rank-0 trace, so give HTA a directory without it (--et elsewhere, or --no-et).\n"
    "\nThe files are written as recording goes, to <file>.partial (flushed every second), and\n"
    "renamed into place at the end; if tprof is killed, `tprof recover <file>.partial` turns what\n"
    "was flushed into a valid file. Files are created new and mode 0600 (--mode to share them);\n"
    "an existing <file>.partial, or a link there, is refused rather than followed.\n"
    "\nExceptions are safe to trace: tprof closes ops at their `ret` instructions and at the\n"
    "C++ runtime's catch, never with uretprobes; an op a C++ exception ended is kept and\n"
    "flagged \"tprof: unwound\".";

// "0640" -> 0640; nullopt unless 1 to 4 octal digits.
std::optional<mode_t> parse_file_mode(const std::string& text) {
  if (text.empty() || text.size() > 4 || text.find_first_not_of("01234567") != std::string::npos)
    return std::nullopt;
  return static_cast<mode_t>(std::stoul(text, nullptr, 8));
}

constexpr const char* kRecoverFooter =
    "\nA tprof that was killed (SIGKILL, OOM, a crash) leaves <file>.partial beside each file it\n"
    "was writing, holding everything up to its last flush (at most a second old). recover keeps\n"
    "every complete event, closes the file as tprof would have, marks it recovered (\"tprof_summary\":\n"
    "{\"recovered\": true} in a trace, \"tprof_recovered\": true in an Execution Trace), writes\n"
    "<file> and removes the partial one. Ops still running at the kill are not in it.\n"
    "\nExample:\n"
    "  tprof recover step.pt.trace.json.gz.partial step.et.json.gz.partial";

int recover_files(const std::vector<std::string>& partial_paths, mode_t mode) {
  int status = 0;
  for (const std::string& partial_path : partial_paths) {
    try {
      const auto recovered = tprof::exporters::recover_partial_file(partial_path, mode);
      std::printf("recovered %s: %llu %s\n", recovered.path.c_str(), static_cast<unsigned long long>(recovered.events),
                  recovered.execution_trace ? "nodes" : "events");
    } catch (const std::exception& error) {
      std::fprintf(stderr, "tprof: error: %s\n", error.what());
      status = 1;
    }
  }
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{kDescription, "tprof"};
  app.set_version_flag("--version", TPROF_VERSION);
  app.require_subcommand(1);
  // One line, in the same form as every other tprof error.
  app.failure_message([](const CLI::App*, const CLI::Error& error) {
    return "tprof: error: " + std::string(error.what()) + " (see tprof --help)\n";
  });

  tprof::AttachOptions options;
  double duration_s = 0;
  size_t buffer_mb = options.ring_buffer_bytes >> 20;
  CLI::App* attach = app.add_subcommand("attach", "Record the ATen ops and Python stacks of a running process");
  attach->footer(kAttachFooter);
  attach->add_option("pid", options.pid, "Process id of the Python (PyTorch) process")
      ->required()
      ->check(CLI::Range(1, 1 << 22));  // the kernel's largest pid_max
  attach->add_option("-d,--duration", duration_s, "Stop after this many seconds (default: until Ctrl-C)")
      ->check(CLI::Range(0.001, 1e7));
  attach->add_option("-o,--output", options.output_path,
                     "Trace file; a .gz suffix compresses it (default: <host>_<pid>.<unix_ns>.pt.trace.json)");
  attach->add_option("--et", options.execution_trace_path,
                     "Execution Trace file; a .gz suffix compresses it (default: the trace's path "
                     "with .pt.trace.json replaced by .et.json)");
  std::string mode = "0600";
  attach->add_option("--mode", mode,
                     "Permission bits of the files written, in octal; traces hold paths, arguments "
                     "and code, so only their owner may read them by default")
      ->capture_default_str()
      ->check([](const std::string& text) -> std::string {
        return parse_file_mode(text) ? "" : "not an octal file mode like 0640: " + text;
      });
  bool no_execution_trace = false;
  attach->add_flag("--no-et", no_execution_trace, "Write no Execution Trace")->excludes("--et");
  attach->add_option("--buffer-mb", buffer_mb, "BPF ring buffer size in MiB, rounded up to a power of two")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  bool no_python = false;
  attach->add_flag("--no-python", no_python,
                   "Record ops only: no Python stacks, no python_function spans, no stack sampler");
  bool no_shapes = false;
  attach->add_flag("--no-shapes", no_shapes,
                   "Record ops without their inputs (Input Dims/type/Strides, Concrete Inputs) and "
                   "outputs, which costs less per op");
  attach->add_option("--sample-hz", options.sample_hz,
                     "Rate of the stack sampler that bounds python_function spans between ops, per CPU")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  attach->add_flag("-q,--quiet", options.quiet, "Print only errors");

  std::vector<std::string> partial_paths;
  std::string recover_mode = "0600";
  CLI::App* recover =
      app.add_subcommand("recover", "Turn the .partial files a killed tprof left into a valid trace and Execution Trace");
  recover->footer(kRecoverFooter);
  recover->add_option("files", partial_paths, "<file>.partial files, traces or Execution Traces, plain or .gz")
      ->required()
      ->check(CLI::ExistingFile);
  recover->add_option("--mode", recover_mode, "Permission bits of the files written, in octal")
      ->capture_default_str()
      ->check([](const std::string& text) -> std::string {
        return parse_file_mode(text) ? "" : "not an octal file mode like 0640: " + text;
      });

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error);
  }
  if (recover->parsed()) return recover_files(partial_paths, *parse_file_mode(recover_mode));
  if (attach->count("--duration") > 0) options.duration_s = duration_s;
  options.ring_buffer_bytes = buffer_mb << 20;
  options.python_stacks = !no_python;
  options.record_shapes = !no_shapes;
  options.execution_trace = !no_execution_trace;
  options.output_mode = *parse_file_mode(mode);

  try {
    return tprof::run_attach(options);
  } catch (const tprof::Error& error) {
    std::fprintf(stderr, "tprof: error: %s\n", error.what());
  } catch (const std::exception& error) {
    std::fprintf(stderr, "tprof: error: %s\n", error.what());
  }
  return 1;
}
