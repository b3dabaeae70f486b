// Row-sparse gradients: densifying, adding two, and the row reads and writes of optimizer steps.
#include "halfgrad/autograd/sparse_rows.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <vector>

#include "halfgrad/autograd/kernels/cast.h"
#include "halfgrad/autograd/ops/elementwise.h"
#include "halfgrad/base/error.h"
#include "halfgrad/base/parallel.h"

namespace hg {
namespace {

size_t row_bytes(const Tensor& t) { return size_t(t.size(1)) * element_size(t.dtype()); }

// The rows of g placed at their positions in `rows` (a sorted superset of g.rows), zeros in the
// others: byte copies, so no value changes.
Tensor spread(const SparseRows& g, const std::vector<int64_t>& rows) {
  Tensor out = Tensor::zeros({int64_t(rows.size()), g.values.size(1)}, g.values.dtype());
  const size_t bytes = row_bytes(g.values);
  size_t k = 0;
  for (size_t i = 0; i < g.rows.size(); ++i) {
    while (rows[k] != g.rows[i]) ++k;
    std::memcpy(out.bytes() + k * bytes, g.values.bytes() + i * bytes, bytes);
  }
  return out;
}

}  // namespace

Tensor to_dense(const SparseRows& g, const Shape& shape) {
  check(shape.ndim() == 2 && g.values.ndim() == 2 && g.values.size(1) == shape[1] &&
            g.values.size(0) == int64_t(g.rows.size()),
        "to_dense: sparse rows of shape ", g.values.shape(), " (", g.rows.size(), " ids) into ", shape);
  Tensor out = Tensor::zeros(shape, g.values.dtype());
  const size_t bytes = row_bytes(g.values);
  for (size_t i = 0; i < g.rows.size(); ++i) {
    std::memcpy(out.bytes() + size_t(g.rows[i]) * bytes, g.values.bytes() + i * bytes, bytes);
  }
  return out;
}

SparseRows add(const SparseRows& a, const SparseRows& b) {
  check(a.values.dtype() == b.values.dtype() && a.values.size(1) == b.values.size(1), "add: sparse rows of shape ",
        a.values.shape(), " ", dtype_name(a.values.dtype()), " and ", b.values.shape(), " ",
        dtype_name(b.values.dtype()));
  std::vector<int64_t> rows;
  rows.reserve(a.rows.size() + b.rows.size());
  std::set_union(a.rows.begin(), a.rows.end(), b.rows.begin(), b.rows.end(), std::back_inserter(rows));
  // A row present on one side is added to +0 too: the dense sum turns a -0 into +0 there.
  Tensor values = add(spread(a, rows), spread(b, rows));
  return {std::move(rows), std::move(values)};
}

namespace {

// t must be 2-D and hold every row of `rows`; the error names `op`.
void check_rows(const Tensor& t, std::span<const int64_t> rows, const char* op) {
  check(t.ndim() == 2, op, ": tensor '", t.name(), "' of shape ", t.shape(), " is not 2-D");
  for (const int64_t row : rows) {
    check(row >= 0 && row < t.size(0), op, ": row ", row, " is outside tensor '", t.name(), "' of shape ", t.shape());
  }
}

// body(first, count, staging) for `rows` (n of them) of the 2-D tensor t, in blocks of about 4,096
// values, on a team when there are enough: read_rows and write_rows convert a block per call, not
// a row (a call per row of a narrow table cost more than its row). staging holds a block in t's
// dtype, private to the calling thread; null for f32, whose rows need no conversion.
template <class Body>
void for_row_blocks(const Tensor& t, int64_t n, const Body& body) {
  const int64_t c = t.size(1);
  const int64_t per = std::max<int64_t>(1, 4096 / std::max<int64_t>(c, 1)), blocks = (n + per - 1) / per;
  maybe_parallel(use_team(double(n) * double(c), kParallelElements), [&] {
    std::vector<std::byte> staging(t.dtype() == DType::f32 ? 0 : size_t(per * c) * element_size(t.dtype()));
#pragma omp for schedule(static)
    for (int64_t b = 0; b < blocks; ++b) {
      body(b * per, std::min(per, n - b * per), staging.empty() ? nullptr : staging.data());
    }
  });
}

}  // namespace

std::vector<float> read_rows(const Tensor& t, std::span<const int64_t> rows) {
  check_rows(t, rows, "read_rows");
  const int64_t c = t.size(1);
  const size_t row_bytes = size_t(c) * element_size(t.dtype());
  std::vector<float> out(rows.size() * size_t(c));
  for_row_blocks(t, int64_t(rows.size()), [&](int64_t first, int64_t count, std::byte* staging) {
    // f32 rows are copied to their place in `out`; narrow ones are gathered, then widened at once.
    std::byte* gathered = staging ? staging : reinterpret_cast<std::byte*>(out.data() + first * c);
    for (int64_t r = 0; r < count; ++r) {
      std::memcpy(gathered + size_t(r) * row_bytes, t.bytes() + size_t(rows[size_t(first + r)]) * row_bytes, row_bytes);
    }
    if (staging) kernels::load_f32(out.data() + first * c, staging, t.dtype(), 0, count * c);
  });
  return out;
}

void write_rows(const Tensor& t, std::span<const int64_t> rows, std::span<const float> values,
                const precision::RoundingOptions& rounding, uint64_t seed, uint64_t first_event) {
  check_rows(t, rows, "write_rows");
  check(values.size() == rows.size() * size_t(t.size(1)), "write_rows: ", values.size(), " values for ", rows.size(),
        " rows of tensor '", t.name(), "' of shape ", t.shape());
  const int64_t c = t.size(1);
  const size_t row_bytes = size_t(c) * element_size(t.dtype());
  for_row_blocks(t, int64_t(rows.size()), [&](int64_t first, int64_t count, std::byte* staging) {
    // Narrow rows are rounded at once (stochastic rounding: row by row), then each row's bits
    // copied into place; f32 rows are copied as they are.
    const float* block = values.data() + first * c;
    if (staging && rounding.mode != precision::Rounding::kStochastic) {
      kernels::store_rounded(staging, t.dtype(), 0, block, count * c, rounding, seed, 0);
    } else if (staging) {  // each row draws the events of its place in t
      for (int64_t r = 0; r < count; ++r) {
        kernels::store_rounded(staging, t.dtype(), r * c, block + r * c, c, rounding, seed,
                               first_event + uint64_t(rows[size_t(first + r)] * c));
      }
    }
    const std::byte* source = staging ? staging : reinterpret_cast<const std::byte*>(block);
    for (int64_t r = 0; r < count; ++r) {
      std::memcpy(t.bytes() + size_t(rows[size_t(first + r)]) * row_bytes, source + size_t(r) * row_bytes, row_bytes);
    }
  });
}

}  // namespace hg
