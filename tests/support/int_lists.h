// The model keeps sizes, strides and int values in inline lists (model::Dims, IntValues);
// tests compare them with plain vectors.
#pragma once

#include <cstdint>
#include <vector>

namespace tprof::testing {

template <typename IntList>
std::vector<int64_t> as_vector(const IntList& values) {
  return {values.begin(), values.end()};
}

}  // namespace tprof::testing
