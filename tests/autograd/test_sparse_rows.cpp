// Row-sparse gradients (halfgrad/autograd/sparse_rows.h): embedding(..., sparse = true) against the dense
// path it must reproduce. The oracle is the dense gradient of the same graph: the sparse one must
// list exactly its nonzero-able rows (the ids, without padding) and hold its bits in them, in every
// dtype, for a table used twice, over two backward calls, and mixed with a dense contribution.
#include <algorithm>
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <set>

#include "halfgrad/autograd/all_ops.h"
#include "halfgrad/autograd/sparse_rows.h"
#include "halfgrad/autograd/tape.h"
#include "halfgrad/base/error.h"
#include "gradcheck.h"

namespace hg {
namespace {

using testing::random_tensor;

constexpr int64_t kV = 11, kC = 7;

// Bit patterns of a tensor's elements (f32 images: exact for f16 and bf16, so equal bits
// here are equal bits in the tensor).
std::vector<uint32_t> bits(const std::vector<float>& values) {
  std::vector<uint32_t> out;
  for (float v : values) out.push_back(std::bit_cast<uint32_t>(v));
  return out;
}

std::vector<float> row(const std::vector<float>& values, int64_t r) {
  return {values.begin() + r * kC, values.begin() + (r + 1) * kC};
}

// The table as a leaf of `dtype`, the same values on every call.
Tensor table(DType dtype) { return random_tensor({kV, kC}, 91).to(dtype).detach().set_requires_grad(); }

// Checks that `sparse` holds exactly the rows `rows` of `dense` (a (V, C) gradient), bit for
// bit, and that `dense` is zero in every other row.
void check_rows_match(const SparseRows& sparse, const Tensor& dense, const std::set<int64_t>& rows) {
  REQUIRE(sparse.rows == std::vector<int64_t>(rows.begin(), rows.end()));
  REQUIRE(sparse.values.dtype() == dense.dtype());
  const std::vector<float> d = dense.to_vector(), s = sparse.values.to_vector();
  for (int64_t r = 0; r < kV; ++r) {
    const auto it = rows.find(r);
    INFO("row " << r);
    if (it == rows.end()) {
      CHECK(row(d, r) == std::vector<float>(kC, 0.0f));
    } else {
      CHECK(bits(row(s, std::distance(rows.begin(), it))) == bits(row(d, r)));
    }
  }
}

}  // namespace

TEST_CASE("a sparse embedding's gradient holds the dense gradient's touched rows bit for bit", "[sparse][grad]") {
  // Duplicates (id 3 four times, in both texts) and padding (id 9), projected through a random
  // tensor so no sum hides a wrong row; scaled so f16 and bf16 round the sums.
  const Indices ids({3, 1, 3, 9, 7, 3, 0, 9, 3, 1}, {2, 5});
  const Tensor projection = random_tensor({2, 5, kC}, 92, -3.0f, 3.0f);
  for (const DType dtype : {DType::f32, DType::f16, DType::bf16}) {
    INFO(dtype_name(dtype));
    Tensor dense = table(dtype), sparse = table(dtype);
    backward(sum(mul(embedding(ids, dense, /*padding_idx=*/9), projection)));
    backward(sum(mul(embedding(ids, sparse, /*padding_idx=*/9, /*sparse=*/true), projection)));
    REQUIRE(sparse.sparse_grad() != nullptr);
    check_rows_match(*sparse.sparse_grad(), dense.grad(), {0, 1, 3, 7});
    CHECK(sparse.grad_values().same(sparse.sparse_grad()->values));
  }
}

// The sparse path orders positions by id with a radix sort of 11-bit digits: ids that agree in
// their low digits and differ above them, in tables needing one, two and three digits, each
// repeated at scattered positions so that a sum taken out of position order changes bits.
TEST_CASE("a sparse embedding's rows sum in position order in tables of one to three radix digits", "[sparse][grad]") {
  for (const int64_t v : {int64_t{2000}, int64_t{1} << 21, (int64_t{1} << 22) + 5000}) {
    INFO("vocabulary " << v);
    std::vector<int32_t> distinct = {0, 5, int32_t(v - 1), int32_t(v / 2), int32_t(v / 2) + 1};
    if (v > 2048) distinct.insert(distinct.end(), {2047, 2048, 2048 + 5, 4096 + 5});
    if (v > (int64_t{1} << 22)) distinct.insert(distinct.end(), {(1 << 22) - 1, 1 << 22, (1 << 22) + 5});
    std::vector<int32_t> values;
    // 7 is prime to every count of distinct ids here (5, 9, 12): each id comes back every few positions.
    for (int64_t i = 0; i < 120; ++i) values.push_back(distinct[size_t(i * 7 % int64_t(distinct.size()))]);
    const Indices ids(values, {int64_t(values.size())});
    const Tensor projection = random_tensor({int64_t(values.size()), 2}, 97, -3.0f, 3.0f);
    Tensor dense = Tensor::zeros({v, 2}).set_requires_grad(), sparse = Tensor::zeros({v, 2}).set_requires_grad();
    backward(sum(mul(embedding(ids, dense), projection)));
    backward(sum(mul(embedding(ids, sparse, -1, /*sparse=*/true), projection)));
    REQUIRE(sparse.sparse_grad() != nullptr);
    const SparseRows& g = *sparse.sparse_grad();
    const std::set<int32_t> touched(distinct.begin(), distinct.end());
    REQUIRE(g.rows == std::vector<int64_t>(touched.begin(), touched.end()));
    const std::vector<float> d = dense.grad().to_vector(), s = g.values.to_vector();
    std::vector<float> expected;
    for (const int64_t r : g.rows) expected.insert(expected.end(), d.begin() + r * 2, d.begin() + r * 2 + 2);
    CHECK(bits(s) == bits(expected));
  }
}

TEST_CASE("a table used twice, and over two backward calls, sums its sparse gradients as the dense path",
          "[sparse][grad]") {
  // The two lookups share rows 2 and 5; each backward adds into the gradient of the first.
  const Indices first({2, 5, 5, 8}, {4}), second({5, 0, 2, 2}, {4});
  const Tensor p1 = random_tensor({4, kC}, 93, -3.0f, 3.0f), p2 = random_tensor({4, kC}, 94, -3.0f, 3.0f);
  for (const DType dtype : {DType::f32, DType::f16}) {
    INFO(dtype_name(dtype));
    Tensor dense = table(dtype), sparse = table(dtype);
    for (const bool is_sparse : {false, true}) {
      Tensor& w = is_sparse ? sparse : dense;
      backward(
          add(sum(mul(embedding(first, w, -1, is_sparse), p1)), sum(mul(embedding(second, w, -1, is_sparse), p2))));
    }
    check_rows_match(*sparse.sparse_grad(), dense.grad(), {0, 2, 5, 8});
    // A second backward call (gradient accumulation over micro-batches) adds rows 1 and 5.
    const Indices third({1, 5}, {2});
    backward(sum(mul(embedding(third, dense), narrow(p1, 0, 0, 2))));
    backward(sum(mul(embedding(third, sparse, -1, true), narrow(p1, 0, 0, 2))));
    check_rows_match(*sparse.sparse_grad(), dense.grad(), {0, 1, 2, 5, 8});
  }
}

TEST_CASE("a sparse and a dense contribution to one table sum to the dense path's gradient", "[sparse][grad]") {
  const Indices ids({4, 4, 6}, {3});
  const Tensor p1 = random_tensor({3, kC}, 95), p2 = random_tensor({kV, kC}, 96);
  for (const bool sparse_first : {false, true}) {
    INFO("the sparse contribution is accumulated " << (sparse_first ? "first" : "second"));
    Tensor dense = table(DType::f16), mixed = table(DType::f16);
    // Backward runs the later branch first: its contribution reaches the gradient first.
    auto loss = [&](const Tensor& w, bool sparse) {
      if (sparse_first) {
        const Tensor whole = sum(mul(w, p2));
        return add(whole, sum(mul(embedding(ids, w, -1, sparse), p1)));
      }
      const Tensor looked_up = sum(mul(embedding(ids, w, -1, sparse), p1));
      return add(looked_up, sum(mul(w, p2)));
    };
    backward(loss(dense, false));
    backward(loss(mixed, true));
    REQUIRE(mixed.sparse_grad() == nullptr);
    CHECK(bits(mixed.grad().to_vector()) == bits(dense.grad().to_vector()));
  }
}

TEST_CASE("a sparse embedding of a computed table passes a dense gradient back", "[sparse][grad]") {
  // Only a leaf keeps a sparse gradient: ops' backward closures take dense ones.
  const Indices ids({1, 1, 3}, {3});
  Tensor dense = table(DType::f32), sparse = table(DType::f32);
  backward(sum(embedding(ids, mul_scalar(dense, 3.0f))));
  backward(sum(embedding(ids, mul_scalar(sparse, 3.0f), -1, true)));
  REQUIRE(sparse.sparse_grad() == nullptr);
  CHECK(bits(sparse.grad().to_vector()) == bits(dense.grad().to_vector()));
}

TEST_CASE("padding_idx gets no sparse row and ids that are all padding give an empty gradient", "[sparse][grad]") {
  Tensor w = table(DType::f32);
  backward(sum(embedding(Indices({0, 0, 0}, {3}), w, /*padding_idx=*/0, true)));
  REQUIRE(w.sparse_grad() != nullptr);
  CHECK(w.sparse_grad()->rows.empty());
  CHECK(w.sparse_grad()->values.shape() == Shape({0, kC}));
  CHECK(w.has_grad());
  w.zero_grad();
  CHECK_FALSE(w.has_grad());
}

TEST_CASE("a row-sparse gradient is not readable as a dense one, and is checked when set", "[sparse]") {
  Tensor w = table(DType::f32).set_name("tok");
  backward(sum(embedding(Indices({2}, {1}), w, -1, true)));
  REQUIRE_THROWS_WITH(w.grad(),
                      Catch::Contains("'tok'") && Catch::Contains("row-sparse") && Catch::Contains("sparse_grad()"));
  REQUIRE_THROWS_WITH(w.set_sparse_grad({{3, 3}, Tensor::zeros({2, kC})}), Catch::Contains("sorted, unique"));
  REQUIRE_THROWS_WITH(w.set_sparse_grad({{kV}, Tensor::zeros({1, kC})}), Catch::Contains("out of [0, 11)"));
  REQUIRE_THROWS_WITH(w.set_sparse_grad({{1}, Tensor::zeros({1, kC}, DType::f16)}), Catch::Contains("do not match"));
  Tensor hooked = table(DType::f32);
  hooked.register_hook([](const Tensor& g) { return g; });
  REQUIRE_THROWS_WITH(backward(sum(embedding(Indices({2}, {1}), hooked, -1, true))), Catch::Contains("hooks"));
  active_tape().clear();
}

TEST_CASE("adding sparse rows rounds each element as add() does, a lone -0 included", "[sparse]") {
  // f16: 0.5 + 2^-12 is a tie that rounds to even (0.5); -0 + 0 is +0, as in the dense sum.
  const SparseRows a{{1, 4}, Tensor::from_vector({1.0f, -0.0f, 0.5f, 2.0f}, {2, 2}, DType::f16)};
  const SparseRows b{{2, 4}, Tensor::from_vector({3.0f, 4.0f, 0x1p-12f, 0.25f}, {2, 2}, DType::f16)};
  const SparseRows sum = add(a, b);
  CHECK(sum.rows == std::vector<int64_t>{1, 2, 4});
  const std::vector<float> dense = add(to_dense(a, {5, 2}), to_dense(b, {5, 2})).to_vector();
  const std::vector<float> got = sum.values.to_vector();
  CHECK(bits(got) == bits({dense[2], dense[3], dense[4], dense[5], dense[8], dense[9]}));
  CHECK(std::bit_cast<uint32_t>(got[1]) == 0u);  // +0, not -0
  CHECK(got[4] == 0.5f);                         // the tie, rounded to even
}

// write_rows rounds narrow rows a block at a time (4096 / C rows) and copies their bits into place:
// the same bits as assign_nearest row by row, over several blocks, with halfway values (ties to
// even) and values beyond f16's range among them; other rows untouched. read_rows gathers a block
// and widens it at once: the same values as Tensor::read row by row. A row outside the table is a
// named error for both.
TEST_CASE("write_rows and read_rows give the row-by-row bits in every dtype, over several blocks", "[sparse]") {
  constexpr int64_t kTableRows = 2000, kWidth = 24;  // 170 rows a block: 1,100 rows are 7 blocks
  std::vector<int64_t> rows;
  for (int64_t r = 3; r < kTableRows && rows.size() < 1100; r += 1 + r % 3) rows.push_back(r);
  REQUIRE(rows.size() == 1100);
  std::vector<float> values = random_tensor({int64_t(rows.size()), kWidth}, 98, -4.0f, 4.0f).to_vector();
  values[0] = 1.0f + 0x1p-11f;      // halfway between two f16 values: rounds to even (1.0)
  values[1] = 1.0f + 3 * 0x1p-11f;  // halfway, rounds up to even
  values[2] = 1.0e6f;               // beyond f16's range: inf
  for (const DType dtype : {DType::f32, DType::f16, DType::bf16}) {
    INFO(dtype_name(dtype));
    const Tensor fill = random_tensor({kTableRows, kWidth}, 99).to(dtype);
    Tensor blocks = fill.clone(), by_row = fill.clone();
    write_rows(blocks, rows, values);
    for (size_t k = 0; k < rows.size(); ++k) {
      by_row.assign_nearest(std::span<const float>(values).subspan(k * kWidth, kWidth), rows[k] * kWidth);
    }
    CHECK(bits(blocks.to_vector()) == bits(by_row.to_vector()));
    CHECK(blocks.to_vector() != fill.to_vector());
    // read_rows, gathering and widening a block at a time, gives each row as Tensor::read does.
    const std::vector<float> read = read_rows(fill, rows);
    std::vector<float> row_by_row(rows.size() * kWidth);
    for (size_t k = 0; k < rows.size(); ++k) {
      fill.read(std::span<float>(row_by_row).subspan(k * kWidth, kWidth), rows[k] * kWidth);
    }
    CHECK(bits(read) == bits(row_by_row));
  }
  const Tensor table = Tensor::zeros({4, 3}, DType::f16).set_name("table");
  const std::vector<int64_t> outside = {1, 4};
  REQUIRE_THROWS_WITH(read_rows(table, outside), "read_rows: row 4 is outside tensor 'table' of shape (4, 3)");
  REQUIRE_THROWS_WITH(write_rows(table, outside, std::vector<float>(6, 1.0f)),
                      "write_rows: row 4 is outside tensor 'table' of shape (4, 3)");
}

}  // namespace hg
