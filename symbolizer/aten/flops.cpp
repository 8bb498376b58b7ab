#include "symbolizer/aten/flops.h"

namespace tprof::symbolizer {
namespace {

const model::Dims* tensor_sizes(const std::vector<model::Value>& inputs, size_t index) {
  if (index >= inputs.size() || inputs[index].kind != model::ValueKind::kTensor) return nullptr;
  return &inputs[index].tensor.sizes;
}

const model::IntValues* int_list(const std::vector<model::Value>& inputs, size_t index, size_t length) {
  if (index >= inputs.size() || inputs[index].kind != model::ValueKind::kIntList) return nullptr;
  const model::IntValues& values = inputs[index].ints;
  return values.size() == length && inputs[index].list_length == length ? &values : nullptr;
}

uint64_t product(const model::Dims& dims) {
  uint64_t result = 1;
  for (const int64_t dim : dims) result *= static_cast<uint64_t>(dim);
  return result;
}

// 2 * batch * out_h * out_w * kernel_h * kernel_w * in_channels * out_channels / groups, the
// output size from input, padding, dilation and stride (inputs 3-6 of aten::conv2d).
std::optional<uint64_t> conv2d_flops(const std::vector<model::Value>& inputs) {
  const model::Dims* input = tensor_sizes(inputs, 0);
  const model::Dims* weight = tensor_sizes(inputs, 1);
  const model::IntValues* stride = int_list(inputs, 3, 2);
  const model::IntValues* padding = int_list(inputs, 4, 2);
  const model::IntValues* dilation = int_list(inputs, 5, 2);
  if (!input || !weight || !stride || !padding || !dilation || input->size() != 4 || weight->size() != 4) return std::nullopt;
  if (inputs.size() < 7 || inputs[6].kind != model::ValueKind::kInt || inputs[6].ints.empty()) return std::nullopt;
  const auto groups = static_cast<uint64_t>(inputs[6].ints[0]);
  if (groups == 0 || (*stride)[0] * (*stride)[1] == 0) return std::nullopt;
  const auto output = [&](size_t axis) {
    return static_cast<uint64_t>(((*input)[2 + axis] + 2 * (*padding)[axis] - (*dilation)[axis] * ((*weight)[2 + axis] - 1) - 1) /
                                     (*stride)[axis] +
                                 1);
  };
  return 2 * static_cast<uint64_t>((*input)[0]) * output(0) * output(1) * static_cast<uint64_t>((*weight)[2]) *
         static_cast<uint64_t>((*weight)[3]) * static_cast<uint64_t>((*input)[1]) * static_cast<uint64_t>((*weight)[0]) /
         groups;
}

// 2 * mat1's elements / its last dimension * mat2's elements, for bmm also / the batch.
std::optional<uint64_t> gemm_flops(const std::vector<model::Value>& inputs, size_t first, bool batched) {
  const model::Dims* mat1 = tensor_sizes(inputs, first);
  const model::Dims* mat2 = tensor_sizes(inputs, first + 1);
  if (!mat1 || !mat2) return std::nullopt;
  if (mat1->empty() || mat1->back() == 0 || (batched && mat1->front() == 0)) return 0;
  uint64_t flops = product(*mat1) / static_cast<uint64_t>(mat1->back());
  if (batched) flops /= static_cast<uint64_t>(mat1->front());
  return 2 * flops * product(*mat2);
}

}  // namespace

std::optional<uint64_t> estimate_flops(std::string_view op_name, const std::vector<model::Value>& inputs) {
  if (op_name == "aten::conv2d") return conv2d_flops(inputs);
  if (op_name == "aten::mm") return gemm_flops(inputs, 0, false);
  if (op_name == "aten::addmm") return gemm_flops(inputs, 1, false);
  if (op_name == "aten::bmm") return gemm_flops(inputs, 0, true);
  if (op_name == "aten::baddbmm") return gemm_flops(inputs, 1, true);
  if (op_name == "aten::mul" || op_name == "aten::add") {
    const model::Dims* sizes = tensor_sizes(inputs, 0);
    if (!sizes) return std::nullopt;
    return product(*sizes);
  }
  return std::nullopt;
}

}  // namespace tprof::symbolizer
