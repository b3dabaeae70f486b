// SparseRows: a row-sparse gradient of a (V, C) table -- the sorted, unique ids of the rows that
// received gradient and their (R, C) values in the table's dtype; every other row is zero and not
// stored (torch.nn.Embedding(sparse=True), whole rows only). A tensor holds a dense or a row-sparse
// gradient, never both. Why, and how the tape adds them: docs/design_notes.md#sparserows.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "halfgrad/autograd/tensor.h"

namespace hg {

struct SparseRows {
  std::vector<int64_t> rows;  // sorted, unique, each in [0, V)
  Tensor values;              // (R, C), R = rows.size(), row k the gradient of row rows[k]
};

// The (V, C) tensor of `shape` holding g's rows (exact copies) and zeros elsewhere.
Tensor to_dense(const SparseRows& g, const Shape& shape);

// a + b over the union of their rows; every element of the result is add()'s rounding of the
// two rows' elements (a missing row counting as +0), as the dense sum of the two would be.
// a and b share one dtype and row width.
SparseRows add(const SparseRows& a, const SparseRows& b);

// Rows `rows` of the 2-D tensor t widened to f32, concatenated: rows.size() * C values. Rows are
// converted in blocks and copied in parallel when there are enough (each is its own copy: the bits
// do not depend on it). Here and in write_rows a row outside t is an hg::Error naming it.
std::vector<float> read_rows(const Tensor& t, std::span<const int64_t> rows);
// The inverse: rows.size() * C f32 values written into those rows of t, each rounded once
// (nearest even, or `rounding`), as an optimizer step writes a parameter. With stochastic
// rounding, element j of row r draws the event first_event + r * C + j from `seed`: its index in
// t, as Tensor::assign_rounded numbers it, so a row's bits do not depend on the other rows.
void write_rows(const Tensor& t, std::span<const int64_t> rows, std::span<const float> values,
                const precision::RoundingOptions& rounding = {}, uint64_t seed = 0, uint64_t first_event = 0);

}  // namespace hg
