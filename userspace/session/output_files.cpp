#include "userspace/session/output_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string_view>

#include "userspace/assemble/wall_clock.h"
#include "userspace/cli/error.h"

namespace tprof {
namespace {

constexpr const char* kExecutionTraceDirectory = "execution_trace";

// Makes the default ET's directory if it is missing, readable by whom the files are (0600
// files: a 0700 directory); an existing one must be a real directory, not a link.
void make_execution_trace_directory(const std::string& et_path, mode_t file_mode) {
  const std::string directory = et_path.substr(0, et_path.rfind('/'));
  const mode_t mode = file_mode | ((file_mode & 0444) >> 2);
  if (::mkdir(directory.c_str(), mode) != 0 && errno != EEXIST)
    throw Error(errno_message("cannot create " + directory, errno));
  struct stat st{};
  if (::lstat(directory.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw Error("cannot write into " + directory + ": not a directory (a link is not followed)");
}

exporters::OutputFile::Options output_file_options(const AttachOptions& options) {
  return {.mode = options.output_mode, .replace_existing = options.replace_existing};
}

}  // namespace

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

int64_t rank_of(const TargetProcess& target) {
  for (const char* variable : {"RANK", "LOCAL_RANK"}) {
    const auto value = target.environment_variable(variable);
    if (value && !value->empty() && value->find_first_not_of("0123456789") == std::string::npos)
      return std::stoll(*value);
  }
  return -1;
}

std::string default_output_path(const std::string& directory, const TargetProcess& target, uint64_t unix_ns) {
  return default_output_path(directory, target.pid(), rank_of(target), unix_ns);
}

std::string default_output_path(const std::string& directory, pid_t pid, int64_t rank, uint64_t unix_ns) {
  std::string worker = host_name() + "_" + std::to_string(pid);
  if (rank >= 0) worker += "_rank" + std::to_string(rank);
  const std::string name = worker + "." + std::to_string(unix_ns) + ".pt.trace.json";
  return directory.empty() ? name : directory + "/" + name;
}

// Where the Execution Trace goes by default: in the directory "execution_trace" beside the
// trace, named as the trace with ".pt.trace.json" (or a plain ".json") replaced by ".et.json",
// gzip kept, as PARAM and Chakra inflate by the ".gz". Not beside the trace: HTA's
// TraceAnalysis(trace_dir=...) takes every .json/.gz in the directory for a rank's trace (and
// did take the ET for rank 0), but does not look into subdirectories; the ".et.json" name keeps
// the TensorBoard plugin, which loads every *.pt.trace.json, from taking it for a trace too.
std::string default_execution_trace_path(const std::string& trace_path) {
  const auto slash = trace_path.rfind('/');
  const std::string directory = slash == std::string::npos ? std::string() : trace_path.substr(0, slash + 1);
  std::string stem = trace_path.substr(directory.size());
  const bool compressed = stem.ends_with(".gz");
  if (compressed) stem.resize(stem.size() - 3);
  for (const std::string_view suffix : {".pt.trace.json", ".json"}) {
    if (stem.ends_with(suffix)) {
      stem.resize(stem.size() - suffix.size());
      break;
    }
  }
  return directory + kExecutionTraceDirectory + "/" + stem + (compressed ? ".et.json.gz" : ".et.json");
}

TraceFiles::TraceFiles(const std::string& trace_path, const AttachOptions& options)
  : trace(trace_path, output_file_options(options)) {
  if (!options.execution_trace) return;
  const std::string execution_trace_path = options.execution_trace_path.empty()
                                               ? default_execution_trace_path(trace.path())
                                               : options.execution_trace_path;
  if (execution_trace_path == trace.path()) throw Error("--et names the trace file itself: " + trace.path());
  if (options.execution_trace_path.empty()) make_execution_trace_directory(execution_trace_path, options.output_mode);
  execution_trace.emplace(execution_trace_path, output_file_options(options));
}

OutputFiles::OutputFiles(const AttachOptions& options, const TargetProcess& target) {
  if (options.schedule) {
    const std::string directory = options.output_directory.empty() ? "." : options.output_directory;
    if (::access(directory.c_str(), W_OK | X_OK) != 0)
      throw Error(errno_message("cannot write into --output-dir " + directory, errno));
  } else {
    whole.emplace(options.output_path.empty() ? default_output_path(options.output_directory, target, unix_now_ns())
                                              : options.output_path,
                  options);
  }
  if (!options.stacks_path.empty()) {
    if (whole && options.stacks_path == whole->trace.path())
      throw Error("--stacks names the trace file itself: " + whole->trace.path());
    stacks.emplace(options.stacks_path, output_file_options(options));
  }
  const std::string trace_path = whole ? whole->trace.path() : std::string();
  if (!options.memory_stacks_path.empty()) {
    for (const std::string& taken : {trace_path, options.stacks_path})
      if (options.memory_stacks_path == taken)
        throw Error("--memory-stacks names a file tprof writes already: " + taken);
    memory_stacks.emplace(options.memory_stacks_path, output_file_options(options));
  }
  if (!options.memory_timeline_path.empty()) {
    for (const std::string& taken : {trace_path, options.stacks_path, options.memory_stacks_path})
      if (options.memory_timeline_path == taken)
        throw Error("--memory-timeline names a file tprof writes already: " + taken);
    memory_timeline.emplace(options.memory_timeline_path, output_file_options(options));
  }
}

}  // namespace tprof
