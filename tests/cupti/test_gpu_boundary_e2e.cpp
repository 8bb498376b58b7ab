// The GPU path end to end, at the CUPTI boundary, with no GPU (and, last, CUDA API calls seen
// through uprobes where the library is absent): a torch process loads libtprof_cupti.so as CUDA
// would, tprof attaches (its USDT probe wakes the library), and from inside aten::mul (a tensor
// subclass's __torch_dispatch__, under record_function("launch_site")) the process makes real
// cudaLaunchKernel calls into the toolkit's libcudart (they fail without a driver) while CUPTI's
// own activity records (runtime calls, a kernel and a copy per launch) go through the library's
// buffer-completed callback. They must come out of tprof's trace on the right rows, linked to
// the op that launched them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "tests/support/process_harness.h"
#include "tests/support/recorded_workload.h"
#include "tests/support/test_environment.h"
#include "tests/support/trace_validator.h"

namespace tprof::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kLaunches = 20;

json read_json(const fs::path& path) {
  std::ifstream in(path);
  return json::parse(in);
}

TEST(GpuBoundary, KernelsAndCopiesComeOutOnTheirRowsLinkedToTheOpThatLaunchedThem) {
  if (!testing::has_tracing_capabilities())
    GTEST_SKIP() << "\n*** SKIPPED LOUDLY: attaching uprobes needs root; the GPU path is NOT tested ***";
  ScratchDirectory scratch;
  const WorkloadEnvironment host = host_workload(scratch.path(), workload_script("gpu_boundary.py"));
  const fs::path trace_path = scratch.path() / "gpu.pt.trace.json";
  const std::string console = record_workload_with_tprof(
      host,
      {"--library", TPROF_CUPTI_LIBRARY_PATH, "--feeder", TPROF_CUPTI_FEEDER_PATH, "--cudart", TPROF_CUDART_PATH,
       "--launches", std::to_string(kLaunches), "--report", (host.scratch_for_target / "activations.txt").string()},
      trace_path, {"--no-et"});
  // tprof's probe raised the library's semaphore: the library tried to enable CUPTI while it was
  // attached (CUPTI refuses without a GPU), and not before.
  std::ifstream report(host.scratch_for_us / "activations.txt");
  std::string activations;
  std::getline(report, activations);
  EXPECT_EQ(activations, "before=0 attached=1");
  // Each launch's cudaGetDevice is left out, as torch.profiler leaves it out.
  EXPECT_NE(console.find("GPU: 20 kernels, 20 copies and memsets, 0 syncs, 40 CUDA API calls (40 inside an op; "
                         "20 more left out, as torch.profiler leaves them out); "
                         "40 GPU activities linked to their launch; properties of 1 GPU"),
            std::string::npos)
      << console;

  const json trace = read_json(trace_path);
  const std::vector<std::string> violations = validate_trace_file(trace_path);
  EXPECT_TRUE(violations.empty()) << violations.size() << " violations, first: " << violations.front();
  EXPECT_NE(trace.at("tprof").at("gpu").get<std::string>().find("libtprof_cupti.so"), std::string::npos);

  std::map<uint64_t, json> launching_ops;  // the aten::mul ops directly under launch_site, by External id
  std::map<uint64_t, json> calls;          // cuda_runtime events by correlation
  std::vector<json> gpu_events;
  std::map<std::string, int> flows;
  for (const json& event : trace.at("traceEvents")) {
    const std::string category = event.value("cat", "");
    if (category == "cpu_op" && event.at("name") == "aten::mul") launching_ops[event.at("args").at("External id")] = event;
    if (category == "cuda_runtime") calls[event.at("args").at("correlation")] = event;
    if (category == "kernel" || category == "gpu_memcpy") gpu_events.push_back(event);
    if (category == "ac2g") ++flows[event.at("ph").get<std::string>()];
  }
  ASSERT_EQ(calls.size(), static_cast<size_t>(2 * kLaunches));
  std::set<uint64_t> launching_op_ids;
  for (const auto& [correlation, call] : calls) {
    const std::string name = call.at("name");
    EXPECT_TRUE(name == "cudaLaunchKernel" || name == "cudaMemcpyAsync") << name;
    ASSERT_TRUE(call.at("args").contains("External id")) << call.dump();
    const auto op = launching_ops.find(call.at("args").at("External id"));
    ASSERT_NE(op, launching_ops.end()) << "the call's External id is its aten::mul's: " << call.dump();
    EXPECT_EQ(call.at("tid"), op->second.at("tid"));
    EXPECT_GE(call.at("ts").get<double>(), op->second.at("ts").get<double>());
    EXPECT_LE(call.at("ts").get<double>() + call.at("dur").get<double>(),
              op->second.at("ts").get<double>() + op->second.at("dur").get<double>());
    launching_op_ids.insert(op->first);
  }
  EXPECT_EQ(launching_op_ids.size(), static_cast<size_t>(kLaunches)) << "one aten::mul per launch and copy";
  ASSERT_EQ(gpu_events.size(), static_cast<size_t>(2 * kLaunches));
  for (const json& event : gpu_events) {
    EXPECT_EQ(event.at("pid"), 0) << "device 0";
    EXPECT_EQ(event.at("tid"), 7) << "stream 7";
    const auto call = calls.find(event.at("args").at("correlation"));
    ASSERT_NE(call, calls.end()) << event.dump();
    EXPECT_EQ(event.at("args").at("External id"), call->second.at("args").at("External id"));
    if (event.at("cat") == "kernel") {
      EXPECT_EQ(event.at("name"), "tprof_scale(float*, int)");
      EXPECT_EQ(call->second.at("name"), "cudaLaunchKernel");
      EXPECT_EQ(event.at("args").at("grid"), json::parse("[4, 1, 1]"));
      // 4 blocks of 256 threads on 132 SMs, each SM able to hold 8 (32 registers a thread).
      EXPECT_FLOAT_EQ(event.at("args").at("blocks per SM").get<float>(), 4.0f / 132);
      EXPECT_FLOAT_EQ(event.at("args").at("warps per SM").get<float>(), 32.0f / 132);
      EXPECT_EQ(event.at("args").at("est. achieved occupancy %"), 0);
    } else {
      EXPECT_EQ(event.at("name"), "Memcpy DtoH (Device -> Pageable)");
      EXPECT_EQ(call->second.at("name"), "cudaMemcpyAsync");
    }
  }
  // The GPU as the process's driver describes it, sent by the library when tprof attached.
  ASSERT_EQ(trace.at("deviceProperties").size(), 1u) << trace.at("deviceProperties").dump();
  EXPECT_EQ(trace.at("deviceProperties")[0].at("name"), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(trace.at("deviceProperties")[0].at("numSms"), 132);
  EXPECT_EQ(trace.at("deviceProperties")[0].at("totalGlobalMem"), 85045608448);
  EXPECT_EQ(flows["s"], 2 * kLaunches);
  EXPECT_EQ(flows["f"], 2 * kLaunches);
}

// A target that never loaded the library: its CUDA runtime calls come from uprobes on libcudart,
// closed at their `ret` like ops, inside the range that made them, and stay out of the ET.
TEST(CudaApiUprobes, RuntimeCallsComeOutInsideTheRangeThatMadeThem) {
  if (!testing::has_tracing_capabilities())
    GTEST_SKIP() << "\n*** SKIPPED LOUDLY: attaching uprobes needs root; CUDA API uprobes are NOT tested ***";
  ScratchDirectory scratch;
  const WorkloadEnvironment host = host_workload(scratch.path(), workload_script("cuda_calls.py"));
  const fs::path trace_path = scratch.path() / "calls.pt.trace.json";
  const std::string console = record_workload_with_tprof(
      host, {"--cudart", TPROF_CUDART_PATH, "--calls", std::to_string(kLaunches)}, trace_path,
      {"--et", (scratch.path() / "calls.et.json").string()});
  EXPECT_NE(console.find("CUDA API calls are recorded from their uprobes"), std::string::npos) << console;

  const json trace = read_json(trace_path);
  const std::vector<std::string> violations = validate_trace_file(trace_path);
  EXPECT_TRUE(violations.empty()) << violations.size() << " violations, first: " << violations.front();
  std::map<uint64_t, json> annotations;
  std::map<std::string, int> calls;
  for (const json& event : trace.at("traceEvents")) {
    const std::string category = event.value("cat", "");
    if (category == "user_annotation" && event.at("name") == "launch_site")
      annotations[event.at("args").at("External id")] = event;
  }
  for (const json& event : trace.at("traceEvents")) {
    if (event.value("cat", "") != "cuda_runtime") continue;
    ++calls[event.at("name").get<std::string>()];
    const auto annotation = annotations.find(event.at("args").at("External id"));
    ASSERT_NE(annotation, annotations.end()) << event.dump();
    EXPECT_EQ(event.at("tid"), annotation->second.at("tid"));
    EXPECT_GE(event.at("ts").get<double>(), annotation->second.at("ts").get<double>());
    EXPECT_FALSE(event.at("args").contains("stream"));
  }
  EXPECT_EQ(calls["cudaLaunchKernel"], kLaunches);
  EXPECT_EQ(calls["cudaDeviceSynchronize"], kLaunches);
  const json execution_trace = read_json(scratch.path() / "calls.et.json");
  for (const json& node : execution_trace.at("nodes"))
    EXPECT_FALSE(node.at("name").get<std::string>().starts_with("cuda")) << "torch's ET has no CUDA calls";
}

}  // namespace
}  // namespace tprof::test
