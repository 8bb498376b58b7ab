// tprof command line.
#include <CLI/CLI.hpp>

#include <signal.h>
#include <sys/types.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "exporters/partial_recovery.h"
#include "userspace/assemble/step_schedule.h"
#include "userspace/assemble/wall_clock.h"
#include "userspace/loader/uprobe_multi.h"
#include "userspace/session/attach_session.h"
#include "userspace/session/doctor.h"
#include "userspace/session/launch.h"
#include "userspace/session/privileges.h"
#include "userspace/session/process_holder.h"
#include "userspace/cli/error.h"
#include "userspace/cli/report.h"

namespace {

// Exit statuses: a runtime error 1, a usage error (bad option, missing argument) 2.
constexpr int kUsageError = 2;

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
    "                                                   # (and execution_trace/step.et.json.gz)\n"
    "  sudo tprof attach --match train.py --output-dir traces/  # every rank of a job\n"
    "  sudo tprof attach 12345 --children -d 30         # and the workers it starts\n"
    "  sudo tprof attach 12345 --schedule wait=1,warmup=1,active=2,repeat=3 --output-dir traces/\n"
    "                                    # 3 cycles of 2 steps, a trace each, then detach\n"
    "  sudo tprof attach 12345 --max-overhead 5% -d 60  # exact steps now and then, at <= 5% cost\n"
    "  sudo tprof attach 12345 --max-overhead 2% --schedule wait=50,warmup=1,active=3 \\\n"
    "       --max-files 5 --output-dir traces/         # for hours: a trace per cycle, the last 5 kept\n"
    "\nWith several targets each gets its own files, named after its host, pid and rank (RANK in\n"
    "its environment), with one baseTimeNanoseconds and distributedInfo filled in, so that HTA\n"
    "analyses the ranks together. Recording stops when all of them have exited.\n"
    "\nSteps: each return from an optimizer's step() (any torch.optim optimizer) ends one\n"
    "iteration, written as ProfilerStep#N (N from 0 at attach); with --step-function each call of\n"
    "that Python function is one. What a recording holds of an iteration begun before it, or cut\n"
    "off by its stop, is a \"Partial step\" annotation, not a ProfilerStep, so that per-step\n"
    "figures are of whole steps. --schedule keeps only the steps\n"
    "torch.profiler.schedule(wait, warmup, active, repeat, skip_first) would record, counted in\n"
    "those N, and writes each cycle once its last step ends, named as tensorboard_trace_handler\n"
    "names it (<host>_<pid>.<unix_ns>.pt.trace.json in --output-dir); with repeat=R tprof\n"
    "detaches after the R-th cycle, with repeat=0 it cycles until stopped.\n"
    "\nOverhead: each op costs the target a uprobe trap at its entry and one at its return (1 to\n"
    "15 us each, set by the kernel and hypervisor), and each stack sample an interrupt; tprof\n"
    "measures both at attach and prints its estimate of the cost at the end. --max-overhead P%\n"
    "keeps that estimate within P: the per-op probes go in only for windows, each held until it\n"
    "has recorded one whole step (written as ProfilerStep#N with its real N: the steps between\n"
    "windows are counted, not recorded), and closed once the budget is spent. Where the target\n"
    "steps, the windows' cost is also measured as its CPU per step in them against between them,\n"
    "and the larger of measure and estimate counts. Putting the\n"
    "probes in and out costs tprof CPU time, counted too; so a window probes only the ops the\n"
    "process has called so far (read from torch's own first-call flags) and the autograd\n"
    "nodes an earlier window saw run (the first: all of them). Between windows the trace holds GPU\n"
    "activity only; the summary says how many steps were exact. With --schedule too, each window\n"
    "is for one of the schedule's cycles: its probes go in one step before the cycle's warmup\n"
    "steps if the budget allows (a cycle it cannot pay for is skipped), and stay until the\n"
    "cycle's last step has ended; each cycle's steps are one trace, and --max-files bounds the\n"
    "disk. Give warmup enough steps to cover putting the probes in (tens of ms a window on a\n"
    "test VM, more for the first), or each window waits for the cycle after.\n"
    "\nRecording stops at --duration, on Ctrl-C/SIGTERM, or when the target exits; whatever\n"
    "was recorded is then written. Events the ring buffer could not hold are counted and\n"
    "reported (raise --buffer-mb if any are dropped).\n"
    "\nLike torch.profiler with record_shapes=True, each op carries its inputs' shapes, dtypes\n"
    "and strides and the other values among them (ints, floats, bools, devices, strings; reported\n"
    "as unknown where they are out of reach, e.g. a list of optional tensors); --no-shapes leaves\n"
    "them out. record_function()\n"
    "ranges appear as user_annotation events and the autograd engine's backward nodes as\n"
    "cpu_op events, as torch's profiler shows them.\n"
    "\nA PyTorch Execution Trace (schema 1.1.1-chakra.0.0.4, for Chakra and PARAM) is written\n"
    "into the directory execution_trace/ beside the trace (made if missing), linked to it by\n"
    "rf_id == \"Record function id\": not beside it, because HTA's TraceAnalysis(trace_dir=...)\n"
    "takes every .json/.gz in a directory for a rank's trace. --et puts it elsewhere, --no-et\n"
    "turns it off.\n"
    "\nThe files are written as recording goes, to <file>.partial (flushed every second), and\n"
    "renamed into place at the end; if tprof is killed, `tprof recover <file>.partial` turns what\n"
    "was flushed into a valid file. Files are created new and mode 0600 (--mode to share them);\n"
    "an existing <file>.partial, or a link there, is refused rather than followed.\n"
    "\nExceptions are safe to trace: tprof closes ops at their `ret` instructions and at the\n"
    "C++ runtime's catch, never with uretprobes; an op a C++ exception ended is kept and\n"
    "flagged \"tprof: unwound\".";

constexpr const char* kRecordFooter =
    "\nStarts CMD with CUDA_INJECTION64_PATH naming libtprof_cupti.so (the CUPTI library that lets\n"
    "tprof see kernels, copies and CUDA calls) and records it as `attach` would, from its first op:\n"
    "the thread that loads libtorch_cpu is held, before any of torch's code runs, until every probe\n"
    "is in. The command cannot tell (see docs/target-safety.md). Recording ends when the command\n"
    "exits, at --duration, or at a second Ctrl-C (the first is the command's: a signal sent to\n"
    "tprof alone is passed on to it). tprof exits with the command's status (128+N if signal N\n"
    "ended it); a command that never loaded torch leaves an empty trace.\n"
    "\nExample:\n"
    "  sudo tprof record -o run.pt.trace.json.gz -- python train.py --epochs 1\n"
    "  sudo tprof record --follow --output-dir traces -- torchrun --nproc-per-node 2 train.py";

constexpr const char* kEnvFooter =
    "\nCUDA reads CUDA_INJECTION64_PATH once, at cuInit, so a process shows tprof its GPU activity\n"
    "only if it was started with it. Set it where the job starts (the pod spec, the launcher);\n"
    "the library sleeps until tprof attaches and costs nothing measurable until then.\n"
    "\nExample:\n"
    "  eval \"$(tprof env)\"; torchrun train.py   # later: sudo tprof attach <pid>";

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
    "<file> and removes the partial one. Ops still running at the kill are not in it. A damaged\n"
    "event line is dropped and counted, so the output is always valid JSON. A file that a running\n"
    "tprof is still writing is refused. Exit status: 2 on a usage error, 1 if a file failed.\n"
    "\nExample:\n"
    "  tprof recover step.pt.trace.json.gz.partial execution_trace/step.et.json.gz.partial";

// "; 3 damaged lines dropped; invalid UTF-8 in 1 lines replaced by U+FFFD", or nothing.
std::string damage_note(const tprof::exporters::RecoveredFile& recovered) {
  std::string note;
  if (recovered.dropped > 0) note += "; " + std::to_string(recovered.dropped) + " damaged lines dropped";
  if (recovered.repaired > 0)
    note += "; invalid UTF-8 in " + std::to_string(recovered.repaired) + " lines replaced by U+FFFD";
  return note;
}

// One line per file, on stdout when recovered, on stderr (naming it) when not; 1 if any failed.
int recover_files(const std::vector<std::string>& partial_paths, mode_t mode) {
  int status = 0;
  for (const std::string& partial_path : partial_paths) {
    try {
      const auto recovered = tprof::exporters::recover_partial_file(partial_path, mode);
      std::printf("recovered %s: %llu %s%s\n", recovered.path.c_str(), static_cast<unsigned long long>(recovered.events),
                  recovered.execution_trace ? "nodes" : "events", damage_note(recovered).c_str());
    } catch (const std::exception& error) {
      std::fprintf(stderr, "tprof: error: %s\n", error.what());
      status = 1;
    }
  }
  return status;
}

// The end-of-run table's options, as key_averages().table() takes them.
void add_summary_options(CLI::App& command, tprof::SummaryOptions& summary) {
  command.add_option("--sort", summary.sort,
                     "Sort the table by self_cpu_time_total, cpu_time_total, cpu_time (the average), count, "
                     "or, with memory recorded, cpu_memory_usage, self_cpu_memory_usage, cuda_memory_usage or "
                     "self_cuda_memory_usage")
      ->capture_default_str()
      ->check([](const std::string& key) -> std::string {
        return tprof::is_summary_sort_key(key)
                   ? ""
                   : "not a sort key (self_cpu_time_total, cpu_time_total, cpu_time, count, cpu_memory_usage, "
                     "self_cpu_memory_usage, cuda_memory_usage, self_cuda_memory_usage): " + key;
      });
  command.add_option("--row-limit", summary.row_limit, "Rows of the table")->capture_default_str()->check(CLI::Range(1, 1000000));
  command.add_flag("--group-by-shape", summary.group_by_shape,
                   "One row per op and input shapes, as key_averages(group_by_input_shape=True)");
}

constexpr const char* kReportFooter =
    "\nReads a trace tprof wrote, or one torch.profiler exported (export_chrome_trace, or\n"
    "tensorboard_trace_handler's .pt.trace.json[.gz]), and prints the table key_averages().table()\n"
    "would: per op, self CPU time (less the ranges directly inside it on its thread), total, average\n"
    "and calls, from its cpu_op and user_annotation events (torch 1.13's array of events too), and\n"
    "where it has [memory] events (profile_memory=True, tprof --memory) CPU Mem and Self CPU Mem.\n"
    "Streams the file, in about 32 bytes per op; stops with an error past 64 levels of nesting,\n"
    "1 MiB tokens, 16,777,216 ops or 32 GiB of text, and on an event whose fields have the wrong type.\n"
    "--compile adds what dynamo's own profiler reports of a torch.compile'd run, from the\n"
    "\"Torch-Compiled Region: F/N\" ranges torch.profiler and tprof both record (docs/torch-compile.md).\n"
    "\nExamples:\n"
    "  tprof report run.pt.trace.json.gz --sort cpu_time_total --row-limit 20\n"
    "  tprof report torch_profile.json --compile";

// The options `attach` and `record` share: how and where to record.
struct RecordingFlags {
  double duration_s = 0;
  size_t buffer_mb = tprof::AttachOptions{}.ring_buffer_bytes >> 20;
  std::string mode = "0600";
  bool no_execution_trace = false;
  bool no_python = false;
  bool no_shapes = false;
  bool no_plan_cache = false;
  std::string ops, skip_ops;
  bool no_view_ops = false;
  std::string max_overhead;
};

// --max-overhead "5%" or "5": the fraction, 0.05; none for anything but a number in (0, 100].
std::optional<double> parse_percentage(const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || !std::isfinite(value) || value <= 0 || value > 100) return std::nullopt;
  if (*end == '%') ++end;
  if (*end != '\0') return std::nullopt;
  return value / 100;
}

// A number that is neither NaN nor infinite: range checks compare, and NaN passes every comparison.
const CLI::Validator kFinite(
    [](std::string& text) {
      char* end = nullptr;
      const double value = std::strtod(text.c_str(), &end);
      return end != text.c_str() && std::isfinite(value) ? std::string() : "not a finite number: " + text;
    },
    "FINITE");

// A regular expression std::regex compiles (--ops, --skip-ops).
const CLI::Validator kRegularExpression(
    [](std::string& text) {
      try {
        std::regex compiled(text, std::regex::ECMAScript);
        return std::string();
      } catch (const std::regex_error& error) {
        return "'" + text + "' is not a regular expression: " + error.what();
      }
    },
    "REGEX");

void add_recording_options(CLI::App& command, tprof::AttachOptions& options, RecordingFlags& flags) {
  command.add_option("-d,--duration", flags.duration_s,
                     "Stop after this many seconds; 0: until Ctrl-C (the default), for scripts that always pass one")
      ->check(kFinite)
      ->check(CLI::Range(0.0, 1e7))
      ->check([](const std::string& text) -> std::string {
        const double seconds = std::strtod(text.c_str(), nullptr);
        return seconds == 0 || seconds >= 0.001 ? "" : "at least 0.001 s, or 0 for until Ctrl-C: " + text;
      });
  command.add_option("-o,--output", options.output_path,
                     "Trace file; a .gz suffix compresses it (default: <host>_<pid>.<unix_ns>.pt.trace.json)");
  command.add_option("--et", options.execution_trace_path,
                     "Execution Trace file; a .gz suffix compresses it (default: execution_trace/ beside "
                     "the trace, named as the trace with .pt.trace.json replaced by .et.json)");
  command.add_option("--mode", flags.mode,
                     "Permission bits of the files written, in octal; traces hold paths, arguments "
                     "and code, so only their owner may read them by default")
      ->capture_default_str()
      ->check([](const std::string& text) -> std::string {
        return parse_file_mode(text) ? "" : "not an octal file mode like 0640: " + text;
      });
  command.add_flag("--force", options.replace_existing,
                   "Replace output files that already exist (only regular files: a device, directory or "
                   "link at an output path is always refused)");
  command.add_flag("--no-et", flags.no_execution_trace, "Write no Execution Trace")->excludes("--et");
  command.add_option("--stacks", options.stacks_path,
                     "Also write folded stacks (Python frames, then the op, weighted by self time in us) as "
                     "export_stacks does, for flamegraph.pl or speedscope; a .gz suffix compresses them");
  command.add_flag("--memory", options.memory,
                   "Also record torch's allocations and frees, as profile_memory=True: [memory] events in "
                   "the trace, CPU Mem and Self CPU Mem (and CUDA's) in the table, and at the end the CPU "
                   "blocks live at the peak by where they were allocated. Three probes more, one trap per "
                   "allocation and free");
  command.add_option("--memory-stacks", options.memory_stacks_path,
                     "With --memory, also write the blocks live at the peak as folded stacks (Python frames, "
                     "then the op that allocated them, weighted by bytes) for flamegraph.pl or speedscope; a "
                     ".gz suffix compresses them")
      ->needs("--memory");
  command.add_option("--memory-timeline", options.memory_timeline_path,
                     "With --memory, also write the CPU's allocated bytes over time by category (parameter, "
                     "optimizer state, input, temporary, activation, gradient, autograd detail; unknown where "
                     "the ops do not tell), found by torch's MemoryProfile rules, as export_memory_timeline "
                     "writes them (needs shapes): a JSON [times in us, sizes] to a .json or .json.gz path, or to an .html path "
                     "a page that plots them (stacked areas, the peak marked, the op and Python line on hover; "
                     "it works offline)")
      ->needs("--memory")
      ->check([](const std::string& path) -> std::string {
        return path.ends_with(".json") || path.ends_with(".json.gz") || path.ends_with(".html")
                   ? ""
                   : "writes .json, .json.gz or .html: " + path;
      });
  command.add_option("--buffer-mb", flags.buffer_mb, "BPF ring buffer size in MiB, rounded up to a power of two")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  command.add_flag("--no-python", flags.no_python,
                   "Record ops only: no Python stacks, no python_function spans, no stack sampler");
  command.add_flag("--no-shapes", flags.no_shapes,
                   "Record ops without their inputs (Input Dims/type/Strides, Concrete Inputs) and "
                   "outputs, which costs less per op");
  command.add_option("--ops", flags.ops,
                     "Probe only the ops whose name this regular expression finds (ECMAScript, searched in "
                     "'aten::addmm', or in an inductor C++ kernel's 'cpp_fused_sin_0'); each op left out costs "
                     "the target nothing and has no range, and what it calls is still recorded")
      ->check(kRegularExpression);
  command.add_option("--skip-ops", flags.skip_ops,
                     "Leave out the ops whose name this regular expression finds (inductor's C++ kernels "
                     "too: '^cpp_fused_')")
      ->check(kRegularExpression);
  command.add_flag("--no-view-ops", flags.no_view_ops,
                   "Leave out the ops that only return a view of a tensor or read its metadata (aten::view, "
                   "aten::t, aten::transpose, aten::as_strided, aten::size and their kind), a large share of "
                   "the calls of most models");
  command.add_option("--max-overhead", flags.max_overhead,
                     "P%: keep the target's estimated slowdown within P (0 < P <= 100) by putting the "
                     "probes that fire at every op (ops, their returns, autograd nodes) in only for windows, "
                     "each held until it has recorded one whole step; a probe counting Optimizer.step calls "
                     "and GPU activity stay. Steps a window saw whole are ProfilerStep#N, exact, with their "
                     "real N. Ops keep their Python stacks, but no python_function spans are written and no "
                     "stack sampler runs. One target only")
      ->check([](const std::string& text) -> std::string {
        return parse_percentage(text) ? "" : "not a percentage in (0, 100] like 5%: " + text;
      })
      // A free is sized by its allocation, which a window may not have seen.
      ->excludes("--memory");
  command.add_flag("--no-plan-cache", flags.no_plan_cache,
                   "Plan libtorch_cpu's probes anew and keep no plan on disk; by default a plan is kept per "
                   "torch build in /var/cache/tprof/plans ($TPROF_PLAN_CACHE_DIR), so that attaching again "
                   "skips reading the library");
  command.add_option("--sample-hz", options.sample_hz,
                     "Rate of the stack sampler that bounds python_function spans between ops, per CPU")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  command.add_flag("-q,--quiet", options.quiet, "Print only errors");
  add_summary_options(command, options.summary);
}

void apply_recording_flags(const CLI::App& command, const RecordingFlags& flags, tprof::AttachOptions& options) {
  if (command.count("--duration") > 0 && flags.duration_s > 0) options.duration_s = flags.duration_s;
  options.ring_buffer_bytes = flags.buffer_mb << 20;
  options.python_stacks = !flags.no_python;
  options.record_shapes = !flags.no_shapes;
  options.op_selection = tprof::OpSelection(flags.ops, flags.skip_ops, flags.no_view_ops);
  if (!flags.max_overhead.empty()) options.max_overhead = parse_percentage(flags.max_overhead);
  options.plan_cache = !flags.no_plan_cache;
  options.execution_trace = !flags.no_execution_trace;
  options.output_mode = *parse_file_mode(flags.mode);
}

// `tprof env`: one `export NAME=value` line per variable, for a shell or a pod spec.
int print_environment() {
  const auto library = tprof::injection_library_path();
  if (!library) {
    std::fprintf(stderr, "tprof: error: libtprof_cupti.so is not beside tprof (it is built where the CUDA "
                         "toolkit's CUPTI headers are found)\n");
    return 1;
  }
  for (const std::string& variable : tprof::injection_environment(*library)) std::printf("export %s\n", variable.c_str());
  return 0;
}

constexpr const char* kDoctorFooter =
    "\nChecks, without attaching anything: the kernel (6.6+ for uprobe_multi links, BTF, BPF\n"
    "loading), tprof's privileges, and for a PID its Python (3.9-3.14), its torch and whether\n"
    "its TensorImpl layout calibrates (shapes), whether libtprof_cupti.so is loaded (GPU timing),\n"
    "and its namespaces. Each problem comes with a fix. Exits 1 when `tprof attach PID` would\n"
    "fail, 0 otherwise (warnings only say what would be missing).\n"
    "\nExample:\n"
    "  sudo tprof doctor $(pgrep -f train.py)";

// `tprof report TRACE`: the table, on stdout; with `memory`, then what the trace says of memory;
// with `compile`, then its torch.compile summary.
int print_report(const std::string& path, const tprof::SummaryOptions& summary, bool memory, bool compile) {
  try {
    std::vector<std::string> lines;  // the compile summary, read in the same pass as the table
    const tprof::OperatorTotalsTable table =
        tprof::totals_from_trace(path, summary.group_by_shape, {}, compile ? &lines : nullptr);
    std::fputs(tprof::format_summary_table(table, summary).c_str(), stdout);
    if (memory) std::fputs(tprof::memory_report_from_trace(path).c_str(), stdout);
    if (compile) {
      if (lines.empty()) std::printf("torch.compile: no compiled region (\"Torch-Compiled Region: F/N\") in %s\n", path.c_str());
      for (const std::string& line : lines) std::printf("%s\n", line.c_str());
    }
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "tprof: error: %s\n", error.what());
    return 1;
  }
}

// `tprof doctor [PID]`: the checklist, then a verdict; 1 when attach would fail.
int print_doctor_report(std::optional<pid_t> pid) {
  const tprof::DoctorReport report = tprof::run_doctor(pid);
  const auto print = [](const std::vector<tprof::DoctorCheck>& checks) {
    for (const tprof::DoctorCheck& check : checks) {
      const char* mark = check.outcome == tprof::DoctorCheck::Outcome::kOk        ? "ok  "
                         : check.outcome == tprof::DoctorCheck::Outcome::kWarning ? "warn"
                                                                                 : "FAIL";
      std::printf("  %s  %-11s %s\n", mark, check.subject.c_str(), check.finding.c_str());
      if (!check.fix.empty()) std::printf("        %-11s fix: %s\n", "", check.fix.c_str());
    }
  };
  std::printf("this machine:\n");
  print(report.system);
  if (pid) {
    std::printf("process %d:\n", static_cast<int>(*pid));
    print(report.process);
  }
  const std::string what = pid ? "tprof attach " + std::to_string(*pid) : std::string("tprof attach");
  std::printf("%s would %s\n", what.c_str(), report.attach_would_fail() ? "fail: see FAIL above" : "work");
  return report.attach_would_fail() ? 1 : 0;
}

// `tprof record -- CMD`: starts it traced, with GPU timing enabled, records it from the moment it
// loads torch (held there until the probes are in), and ends with its exit status.
int record_command(const std::vector<std::string>& command, tprof::AttachOptions options) {
  // Until the recording reads them, a Ctrl-C must not kill tprof and leave the command unwatched.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  for (const int signal : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stop_signals, signal);
  sigprocmask(SIG_BLOCK, &stop_signals, nullptr);
  if (options.follow) tprof::require_default_names_for_several(options);
  // Before the command starts: a missing privilege is said as such, not as a BPF load failure.
  tprof::require_tracing_privileges(::geteuid());
  tprof::require_uprobe_multi_kernel();
  std::vector<std::string> environment;
  if (const auto library = tprof::injection_library_path()) {
    environment = tprof::injection_environment(*library);
  } else if (!options.quiet) {
    std::fprintf(stderr, "tprof: no libtprof_cupti.so beside tprof: GPU timing is unavailable\n");
  }
  tprof::ProcessHolder holder(options.follow, command, environment);
  return tprof::run_record(options, holder, command.front());
}

}  // namespace

int main(int argc, char** argv) {
  // What a target's `attached` line counts from: tprof's start, as whoever waits for it sees it.
  const uint64_t started_ns = tprof::monotonic_now_ns();
  // A closed stdout or stderr pipe (`tprof ... 2>&1 | head`) must not kill tprof mid-write,
  // least of all between a recording and its files: a failed write is only a lost message.
  std::signal(SIGPIPE, SIG_IGN);
  CLI::App app{kDescription, "tprof"};
  app.set_version_flag("--version", TPROF_VERSION);
  app.require_subcommand(1);
  // One line, in the same form as every other tprof error.
  app.failure_message([](const CLI::App*, const CLI::Error& error) {
    return "tprof: error: " + std::string(error.what()) + " (see tprof --help)\n";
  });

  tprof::AttachOptions options;
  RecordingFlags flags;
  CLI::App* attach = app.add_subcommand("attach", "Record the ATen ops and Python stacks of a running process");
  attach->footer(kAttachFooter);
  attach->add_option("pid", options.pids, "Process ids of the Python (PyTorch) processes: one trace each")
      ->check(CLI::Range(1, 1 << 22));  // the kernel's largest pid_max
  attach->add_option("--match", options.match,
                     "Also every process whose command line matches this regular expression (all the ranks "
                     "of a job: --match 'train.py')");
  CLI::Option* children = attach->add_flag("--children,--follow", options.follow_children,
                   "Also the processes the targets start (torchrun's workers, DataLoader workers, spawned "
                   "processes), each recorded from its first op: held at its load of torch (or at its fork, "
                   "when it inherits it) until its probes are in. The targets are traced (ptrace) meanwhile");
  // A child started before the window opened would wait for it, held.
  attach->add_option("--start-at", options.start_at_unix_s,
                     "Unix time (s) at which recording starts, attached beforehand, so that tprof on "
                     "several nodes records the same window (with --duration): --start-at $(date -d '+1 min' +%s)")
      ->check(kFinite)
      ->check(CLI::PositiveNumber)
      ->excludes(children);
  attach->add_option("--output-dir", options.output_directory,
                     "Where each target's files go, named <host>_<pid>[_rank<R>].<unix_ns>.pt.trace.json "
                     "(default: the current directory)")
      ->check(CLI::ExistingDirectory);
  std::string schedule_text;
  CLI::Option* schedule =
      attach->add_option("--schedule", schedule_text,
                         "wait=W,warmup=U,active=A[,repeat=R][,skip_first=S]: record as torch.profiler.schedule "
                         "does, one trace per cycle in --output-dir")
          ->check([](const std::string& text) -> std::string {
            std::string error;
            return tprof::StepSchedule::parse(text, &error) ? "" : error;
          });
  CLI::Option* step_function = attach->add_option(
      "--step-function", options.step_function,
      "[MODULE:]NAME: a step (ProfilerStep#N) is one call of this Python function, named by its "
      "qualified or plain name (Trainer.train_step, train_step; MODULE as in train:train_step), "
      "instead of ending at each Optimizer.step");
  attach->add_option("--max-files", options.max_files,
                     "With --schedule: keep the files of only the last N cycles, removing older ones as "
                     "each new cycle is written, so that a schedule repeating until stopped (repeat=0) "
                     "keeps a bounded disk")
      ->check(CLI::Range(1, 1000000))
      ->needs(schedule);
  add_recording_options(*attach, options, flags);
  schedule->excludes("--output");
  // Not yet: windows of ops know steps by Optimizer.step only.
  step_function->excludes("--max-overhead");

  std::vector<std::string> command;
  CLI::App* record = app.add_subcommand(
      "record", "Start a command with GPU timing enabled and record it from its first op");
  record->footer(kRecordFooter);
  record->add_option("command", command, "The command and its arguments, after --")->required();
  record->add_flag("--follow", options.follow,
                   "Also every process the command starts (torchrun's ranks, spawned workers, subprocesses), "
                   "each recorded from its first op into its own trace in --output-dir");
  record->add_option("--output-dir", options.output_directory,
                     "Where default-named files go, <host>_<pid>[_rank<R>].<unix_ns>.pt.trace.json (default: the "
                     "current directory)")
      ->check(CLI::ExistingDirectory);
  add_recording_options(*record, options, flags);

  app.add_subcommand("env", "Print the environment a process needs for tprof to see its GPU activity")
      ->footer(kEnvFooter);

  std::string report_path;
  tprof::SummaryOptions report_summary;
  CLI::App* report = app.add_subcommand("report", "Print the per-op table of a saved trace, tprof's or torch.profiler's");
  report->footer(kReportFooter);
  report->add_option("trace", report_path, "A Chrome trace, .json or .json.gz")->required()->check(CLI::ExistingFile);
  add_summary_options(*report, report_summary);
  bool report_memory = false;
  report->add_flag("--memory", report_memory,
                   "Also print what a trace recorded with tprof --memory says of memory: the peak, the blocks "
                   "live at it by the op and Python stack that allocated them, and in a --schedule cycle's "
                   "trace what earlier cycles left live");
  bool report_compile = false;
  report->add_flag("--compile", report_compile,
                   "Also print the torch.compile summary: graphs, graph calls, the ops inside compiled regions "
                   "against all (dynamo's profiler's captured/total), recompiles, graph breaks and the eager ops "
                   "outside every region; from tprof's traces and torch.profiler's alike");

  pid_t doctor_pid = 0;
  CLI::App* doctor = app.add_subcommand("doctor", "Check whether tprof can attach here, and to a process");
  doctor->footer(kDoctorFooter);
  doctor->add_option("pid", doctor_pid, "Process to check (optional)")->check(CLI::Range(1, 1 << 22));

  std::vector<std::string> partial_paths;
  std::string recover_mode = "0600";
  CLI::App* recover =
      app.add_subcommand("recover", "Turn the .partial files a killed tprof left into a valid trace and Execution Trace");
  recover->footer(kRecoverFooter);
  // A missing or unreadable file is the runtime error of that file alone (exit 1, the others
  // recovered); a name that is not a .partial file is a usage error (exit 2, nothing done).
  recover->add_option("files", partial_paths, "<file>.partial files, traces or Execution Traces, plain or .gz")
      ->required()
      ->check([](const std::string& path) -> std::string {
        return path.ends_with(".partial") ? "" : "not a .partial file: " + path;
      });
  recover->add_option("--mode", recover_mode, "Permission bits of the files written, in octal")
      ->capture_default_str()
      ->check([](const std::string& text) -> std::string {
        return parse_file_mode(text) ? "" : "not an octal file mode like 0640: " + text;
      });

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    // --help and --version exit 0; a usage error exits 2, as getopt-based tools do.
    return app.exit(error) == 0 ? 0 : kUsageError;
  }
  if (recover->parsed()) return recover_files(partial_paths, *parse_file_mode(recover_mode));
  if (app.got_subcommand("env")) return print_environment();
  if (report->parsed()) return print_report(report_path, report_summary, report_memory, report_compile);
  if (doctor->parsed())
    return print_doctor_report(doctor->count("pid") > 0 ? std::optional<pid_t>(doctor_pid) : std::nullopt);
  apply_recording_flags(record->parsed() ? *record : *attach, flags, options);
  if (attach->parsed()) options.started_ns = started_ns;
  if (attach->parsed() && !schedule_text.empty()) {
    std::string error;
    options.schedule = tprof::StepSchedule::parse(schedule_text, &error);
  }
  if (attach->parsed() && options.pids.empty() && options.match.empty()) {
    std::fprintf(stderr, "tprof: error: attach needs a pid or --match REGEX (see tprof attach --help)\n");
    return kUsageError;
  }

  try {
    return record->parsed() ? record_command(command, options) : tprof::run_attach(options);
  } catch (const tprof::Error& error) {
    std::fprintf(stderr, "tprof: error: %s\n", error.what());
  } catch (const std::exception& error) {
    std::fprintf(stderr, "tprof: error: %s\n", error.what());
  }
  return 1;
}
