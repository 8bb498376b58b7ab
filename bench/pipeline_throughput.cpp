// Events per second through tprof's real userspace path with no BPF: op records laid out as the
// BPF side writes them (bpf/op_record.h) go through RecordDecoder, SpanCloser (watermark every
// 20 ms of record time, as the recording loop drains) and the sinks the attach session uses
// (Chrome trace and Execution Trace files, gzip or plain, and the console totals).
//
// What is synthetic: the records (nested ops on four threads, 2 M records per second of record
// time, a Python stack on every entry) and the argument decoding, which builds two tensors and a
// Scalar for every op (in one of a few shapes) instead of decoding TensorImpl bytes; the values
// are formatted and written as for real ones.
//
// Usage: tprof-pipeline-throughput [EVENTS] [--gzip] [--no-et] [--no-shapes] [--unique-shapes]
//                                   [--no-sinks] [--directory DIR]
//   (default 4,000,000 events, plain JSON, trace and ET, with argument values, files in $TMPDIR;
//   a tmpfs keeps the disk out of it). --no-sinks measures decoding and closing alone. Besides
//   wall time it reports the CPU time of the run, user and system apart: writing the files'
//   pages is system time, and how much of it a run takes depends on the machine's memory.
#include <sys/resource.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "exporters/chrome_trace_writer.h"
#include "exporters/execution_trace_writer.h"
#include "exporters/output_file.h"
#include "model/trace_sink.h"
#include "op_arguments.h"
#include "op_record.h"
#include "userspace/cli/op_summary.h"
#include "userspace/ingest/record_consumer.h"
#include "userspace/assemble/span_closer.h"

namespace {

namespace fs = std::filesystem;
using namespace tprof;

constexpr uint32_t kThreads = 4;
constexpr uint32_t kOperators = 64;
constexpr uint64_t kDrainPeriodNs = 20'000'000;
constexpr uint64_t kSkewBoundNs = 50'000'000;
constexpr uint64_t kRecordSpacingNs = 2000;  // a record every 2 µs per thread: 2 M/s over 4 threads

model::TensorValue tensor(uint64_t impl, model::Dims sizes) {
  model::TensorValue value;
  value.impl_address = impl;
  value.storage_address = impl + 0x100000;
  value.strides = {sizes.size() > 1 ? sizes[1] : 1, 1};
  value.numel = sizes[0] * sizes[1];
  value.sizes = sizes;
  value.dtype = "float";
  value.itemsize = 4;
  value.device = "cpu";
  return value;
}

// An op's inputs (two tensors and a Scalar) or its output, built for each record as the
// argument decoder builds them. Their shapes come in `variant`s: kShapeVariants per operator
// by default, as a training loop repeats its shapes step after step, or a new one for every
// call (--unique-shapes), as nothing that formats values can remember.
constexpr int64_t kShapeVariants = 8;

std::vector<model::Value> decoded_values(bool returns, int64_t variant) {
  model::Value a;
  a.kind = model::ValueKind::kTensor;
  a.schema_type = "Tensor";
  a.tensor = tensor(0x7f0000001000, {64, 16 + variant});
  if (returns) return {a};
  model::Value b = a;
  b.tensor = tensor(0x7f0000002000, {16 + variant, 64});
  model::Value alpha;
  alpha.kind = model::ValueKind::kInt;
  alpha.schema_type = "Scalar";
  alpha.ints = {1};
  return {a, b, alpha};
}

// One thread's records: an outer op enclosing two inner ones, over and over.
struct RecordStream {
  uint32_t tid;
  uint64_t next_ns;
  uint32_t step = 0;

  op_record next() {
    static constexpr uint8_t kKinds[] = {OP_RECORD_ENTER, OP_RECORD_ENTER, OP_RECORD_EXIT,
                                         OP_RECORD_ENTER, OP_RECORD_EXIT,  OP_RECORD_EXIT};
    static constexpr uint32_t kDepthOp[] = {0, 1, 1, 2, 2, 0};
    op_record record{};
    record.timestamp_ns = next_ns;
    record.sequence_counter = SEQUENCE_COUNTER_UNKNOWN;
    record.tid = tid;
    record.tgid = 1;
    record.kind = kKinds[step % 6];
    record.op_id = (kDepthOp[step % 6] + step / 6 * 3) % kOperators;
    record.abi_version = OP_RECORD_ABI_VERSION;
    if (record.kind == OP_RECORD_ENTER) record.python_stack_id = 1 + step % 3;
    ++step;
    next_ns += kRecordSpacingNs;
    return record;
  }
};

// A record as the ring buffer would hold it: its head, then for op entries and exits (with
// shapes) an argument payload cut after its header (no tensor copies), which the decoder hands
// to decode_arguments; that returns the prepared values. One buffer is reused for every record,
// so that the prepared records are only their heads and the bench's own memory stays small.
class RecordBytes {
 public:
  explicit RecordBytes(bool with_arguments)
      : bytes_(sizeof(op_record) + (with_arguments ? offsetof(op_arguments, tensors) : 0)),
        with_arguments_(with_arguments) {}
  std::span<const std::byte> of(const op_record& head) {
    std::memcpy(bytes_.data(), &head, sizeof(head));
    const bool has_payload = with_arguments_ && (head.kind == OP_RECORD_ENTER || head.kind == OP_RECORD_EXIT);
    return {bytes_.data(), has_payload ? bytes_.size() : sizeof(head)};
  }

 private:
  std::vector<std::byte> bytes_;
  bool with_arguments_;
};

ResolvedStack stack_of_depth_12(int variant) {
  ResolvedStack stack;
  for (int depth = 0; depth < 12; ++depth) {
    ResolvedFrame frame;
    frame.frame_address = 0x1000 + static_cast<uint64_t>(depth) * 0x100;
    frame.code_address = 0x9000 + static_cast<uint64_t>(depth) + (depth == 0 ? static_cast<uint64_t>(variant) : 0);
    frame.file = "/srv/model/train_" + std::to_string(depth) + ".py";
    frame.function = "layer_" + std::to_string(depth) + (depth == 0 ? "_" + std::to_string(variant) : "");
    frame.line = 10 + depth;
    frame.first_line = 5 + depth;
    stack.push_back(frame);
  }
  return stack;
}

double seconds_between(timeval from, timeval to) {
  return static_cast<double>(to.tv_sec - from.tv_sec) + static_cast<double>(to.tv_usec - from.tv_usec) / 1e6;
}

double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t events = 4'000'000;
  bool gzip = false;
  bool execution_trace_on = true;
  bool shapes = true;
  bool unique_shapes = false;
  bool sinks_on = true;
  fs::path parent = fs::temp_directory_path();
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--gzip") == 0) {
      gzip = true;
    } else if (std::strcmp(argv[i], "--no-et") == 0) {
      execution_trace_on = false;
    } else if (std::strcmp(argv[i], "--no-shapes") == 0) {
      shapes = false;
    } else if (std::strcmp(argv[i], "--unique-shapes") == 0) {
      unique_shapes = true;
    } else if (std::strcmp(argv[i], "--no-sinks") == 0) {
      sinks_on = false;
    } else if (std::strcmp(argv[i], "--directory") == 0 && i + 1 < argc) {
      parent = argv[++i];
    } else if (argv[i][0] != '-' && std::isdigit(static_cast<unsigned char>(argv[i][0]))) {
      events = std::stoull(argv[i]);
    } else {
      std::fprintf(stderr, "tprof-pipeline-throughput: unknown argument '%s' (see the usage at the top of %s)\n",
                   argv[i], __FILE__);
      return 2;
    }
  }
  const fs::path directory = parent / ("tprof-throughput-" + std::to_string(::getpid()));
  fs::create_directories(directory);
  const std::string suffix = gzip ? ".json.gz" : ".json";

  std::vector<model::Operator> operators;
  for (uint32_t i = 0; i < kOperators; ++i) {
    model::Operator& op = operators.emplace_back();
    op.name = "aten::op" + std::to_string(i);
    op.schema = op.name + "(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor";
  }
  std::vector<StoredStack> stacks;
  for (int variant = 0; variant < 3; ++variant) {
    ResolvedStack frames = stack_of_depth_12(variant);
    model::PythonStack printable;
    for (const ResolvedFrame& frame : frames) printable.push_back({frame.file, frame.line, frame.function, frame.qualified_name});
    stacks.push_back({std::move(frames), std::move(printable)});
  }

  exporters::OutputFile trace_file((directory / ("t.pt.trace" + suffix)).string());
  exporters::OutputFile execution_trace_file((directory / ("t.et" + suffix)).string());
  exporters::ChromeTraceWriter chrome(trace_file, "t.pt.trace.json");
  exporters::ExecutionTraceWriter execution_trace(execution_trace_file);
  OperatorTotalsSink totals;
  std::vector<model::TraceSink*> writers{&chrome, &totals};
  if (execution_trace_on) writers.push_back(&execution_trace);
  if (!sinks_on) writers.clear();
  model::FanOutSink sinks(writers);
  SpanCloser closer(
      operators, [&](uint64_t id) { return id >= 1 && id <= stacks.size() ? &stacks[id - 1] : nullptr; },
      MonotonicToUnix(1'700'000'000'000'000'000), [](uint32_t tid) { return "worker " + std::to_string(tid); }, sinks);
  uint64_t calls = 0;
  RecordDecoder decoder(closer, {.on_new_thread = [](uint32_t) {},
                                 .on_stack_id = [](uint64_t) {},
                                 .decode_arguments = [&](uint32_t op_id, bool returns, const op_arguments&) {
                                   const uint64_t call = calls++;
                                   return decoded_values(returns, unique_shapes ? static_cast<int64_t>(call)
                                                                                : (op_id + call / 6) % kShapeVariants);
                                 },
                                 .annotation_operator = [](std::string_view, model::RangeKind) { return 0u; },
                                 .boxed_operator = {},
                                 .node_operator = [](uint64_t, model::RangeKind) { return 0u; },
                                 .on_device_activity = {},
                                 .on_python_stack = {},
                                 .complete_arguments = {},
                                 .append_list_elements = {},
                                 .complete_more_arguments = {}});

  std::vector<RecordStream> threads;
  for (uint32_t t = 0; t < kThreads; ++t) threads.push_back({100 + t, 1'000'000 + t * 7});
  // Prepared ahead, so that the clock measures the pipeline, not the generator.
  std::vector<op_record> records;
  records.reserve(events);
  for (uint64_t i = 0; records.size() < events; ++i) records.push_back(threads[i % kThreads].next());
  RecordBytes record_bytes(shapes);

  model::SessionInfo session;
  session.pid = 100;
  session.process_name = "bench";
  session.tprof_version = TPROF_VERSION;
  session.window_start_unix_ns = 1'700'000'000'001'000'000;
  sinks.begin(session);
  rusage usage_before{};
  getrusage(RUSAGE_SELF, &usage_before);
  const auto started = std::chrono::steady_clock::now();
  uint64_t next_drain_ns = 1'000'000 + kDrainPeriodNs;
  uint64_t last_ns = 0;
  for (const op_record& head : records) {
    last_ns = head.timestamp_ns;
    if (head.timestamp_ns >= next_drain_ns) {
      closer.advance(next_drain_ns - kSkewBoundNs);
      next_drain_ns += kDrainPeriodNs;
    }
    decoder.decode(record_bytes.of(head));
  }
  closer.finish(last_ns + 1);
  model::RunSummary summary;
  summary.window_end_unix_ns = 1'700'000'000'000'000'000 + last_ns;
  sinks.finish(summary);
  trace_file.commit();
  execution_trace_file.commit();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  const double trace_mb = static_cast<double>(fs::file_size(directory / ("t.pt.trace" + suffix))) / 1e6;
  const double execution_trace_mb = static_cast<double>(fs::file_size(directory / ("t.et" + suffix))) / 1e6;
  rusage usage_after{};
  getrusage(RUSAGE_SELF, &usage_after);
  const double user_seconds = seconds_between(usage_before.ru_utime, usage_after.ru_utime);
  const double system_seconds = seconds_between(usage_before.ru_stime, usage_after.ru_stime);
  fs::remove_all(directory);
  const double decoded = static_cast<double>(decoder.records());
  std::printf("%llu events (%llu ranges), %s%s%s%s%s: %.2f s wall, %.2f s user, %.2f s system CPU\n"
              "  %.2f M events/s wall; %.2f M events/s per second of user CPU; %.2f M per second of user + system\n"
              "  output %.0f MB trace + %.0f MB ET; peak RSS %.0f MB\n",
              static_cast<unsigned long long>(decoder.records()), static_cast<unsigned long long>(closer.counts().ops),
              gzip ? "gzip" : "plain", execution_trace_on ? "" : ", no ET", shapes ? "" : ", no shapes",
              unique_shapes ? ", unique shapes" : "", sinks_on ? "" : ", no sinks", seconds, user_seconds,
              system_seconds, decoded / seconds / 1e6, decoded / user_seconds / 1e6,
              decoded / (user_seconds + system_seconds) / 1e6, trace_mb, execution_trace_mb, peak_rss_mb());
  return 0;
}
