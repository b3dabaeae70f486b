// The single-process side of data-parallel training (dist/, docs/distributed.md): the loader's
// shards, the one-process communicator and agreement, and the ddp flags. The collectives across
// ranks are tested under mpiexec by tests/mpi/test_ddp.cpp (ctest -L mpi).
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>

#include "halfgrad/base/error.h"
#include "halfgrad/data/data_loader.h"
#include "tests/demos/run_program.h"
#include "halfgrad/dist/communicator.h"
#include "halfgrad/dist/ddp.h"
#include "tests/temp_dir.h"
#include "halfgrad/train/training_arguments.h"

namespace {

using namespace hg;

data::Dataset numbered(int64_t n) {
  data::Dataset d;
  d.source = "numbered";
  d.label_names = {"a", "b"};
  for (int64_t i = 0; i < n; ++i) d.examples.push_back({"text " + std::to_string(i), int32_t(i % 2)});
  return d;
}

std::vector<int64_t> epoch_rows(const data::DataLoader& loader) {
  std::vector<int64_t> rows;
  for (int64_t b = 0; b < loader.num_batches(); ++b) {
    const data::Batch batch = loader.batch(b);
    rows.insert(rows.end(), batch.rows.begin(), batch.rows.end());
  }
  return rows;
}

}  // namespace

TEST_CASE("the loader's shards are disjoint, equal, and together the single loader's batches", "[dist][data]") {
  const data::Tokenizer tokenizer;
  for (const int64_t n : {40, 41, 43}) {  // 40: W divides it; 41, 43: padded with the order's first examples
    const data::Dataset d = numbered(n);
    data::DataLoader single(d, tokenizer, {.batch_size = 8, .seed = 5});
    data::DataLoader r0(d, tokenizer, {.batch_size = 4, .seed = 5, .num_replicas = 2, .rank = 0});
    data::DataLoader r1(d, tokenizer, {.batch_size = 4, .seed = 5, .num_replicas = 2, .rank = 1});
    for (const int64_t epoch : {0, 3}) {
      single.set_epoch(epoch);
      r0.set_epoch(epoch);
      r1.set_epoch(epoch);
      const int64_t shard = (n + 1) / 2;  // torch's DistributedSampler: ceil(n / W) each
      CHECK(r0.shard_size() == shard);
      CHECK(r1.shard_size() == shard);
      CHECK(r0.num_batches() == r1.num_batches());
      const std::vector<int64_t> a = epoch_rows(r0), b = epoch_rows(r1), all = epoch_rows(single);
      std::set<int64_t> seen(a.begin(), a.end());
      seen.insert(b.begin(), b.end());
      CHECK(int64_t(seen.size()) == n);  // every example, on some rank
      if (n % 2 == 0) {
        // Batch k of the shards together is batch k of the single loader at twice the batch size.
        for (int64_t k = 0; k < single.num_batches(); ++k) {
          std::vector<int64_t> together = r0.batch(k).rows, expected = single.batch(k).rows;
          const std::vector<int64_t> other = r1.batch(k).rows;
          together.insert(together.end(), other.begin(), other.end());
          std::sort(together.begin(), together.end());
          std::sort(expected.begin(), expected.end());
          CHECK(together == expected);
        }
        std::vector<int64_t> shards = a;
        shards.insert(shards.end(), b.begin(), b.end());
        std::sort(shards.begin(), shards.end());
        std::vector<int64_t> sorted = all;
        std::sort(sorted.begin(), sorted.end());
        CHECK(shards == sorted);  // disjoint: no example twice
      } else {
        CHECK(int64_t(a.size() + b.size()) == n + 1);  // one example padded in, seen twice
      }
    }
  }
  CHECK_THROWS_WITH(data::DataLoader(numbered(4), tokenizer, {.num_replicas = 2, .rank = 2}),
                    Catch::Contains("rank 2 of 2 replicas"));
}

TEST_CASE("one process: the communicator gathers its own bytes and agreement passes errors through", "[dist]") {
  dist::LocalCommunicator local;
  CHECK(local.rank() == 0);
  CHECK(local.size() == 1);
  const std::vector<int64_t> values = dist::allgather_value(local, int64_t{42});
  CHECK(values == std::vector<int64_t>{42});
  CHECK_NOTHROW(dist::agree(local, [] {}));
  CHECK(testing::error_of([&] { dist::agree(local, [] { fail("the message"); }); }) == "the message");
  CHECK_FALSE(local.failure_agreed());  // one process: nothing to agree on, exit as usual
  CHECK_NOTHROW(dist::check_same(local, {{"a", 1}}, "settings"));
  CHECK(dist::world().size() == 1);  // the tests do not run under mpirun
  // The one-process reduction leaves the gradient alone.
  Tensor p = Tensor::zeros({3});
  p.set_grad(Tensor::from_vector({1, 2, 3}, {3}));
  dist::DistributedDataParallel ddp(local, {.wire = dist::WireFormat::kF16});
  ddp.reduce_gradients({p});
  CHECK(p.grad().to_vector() == std::vector<float>{1, 2, 3});
}

TEST_CASE("ddp_comm and ddp_check_every: parsed, validated, in the JSON", "[dist][train][config]") {
  CHECK(dist::kWireFormatNames.parse("fp16", "x") == dist::WireFormat::kF16);
  CHECK(dist::kWireFormatNames.parse("bf16", "x") == dist::WireFormat::kBf16);
  CHECK(dist::kWireFormatNames.parse("f32", "x") == dist::WireFormat::kF32);
  CHECK(dist::kWireFormatNames.parse("fp32", "x") == dist::WireFormat::kF32);  // an alias, never written
  CHECK_THROWS_WITH(dist::kWireFormatNames.parse("fp8", "ddp_comm (--ddp-comm)"),
                    Catch::Contains("--ddp-comm") && Catch::Contains("'fp8'"));
  train::TrainingArguments a;
  a.ddp_comm = dist::WireFormat::kBf16;
  a.ddp_check_every = 7;
  const train::TrainingArguments back = train::TrainingArguments::from_json(a.to_json(), "test");
  CHECK(a.to_json().at("ddp_comm") == "bf16");
  CHECK(back.ddp_comm == dist::WireFormat::kBf16);
  CHECK(back.ddp_check_every == 7);
  nlohmann::json old = a.to_json();  // a checkpoint written before the keys existed
  old.erase("ddp_comm");
  old.erase("ddp_check_every");
  CHECK(train::TrainingArguments::from_json(old, "test").ddp_comm == dist::WireFormat::kF32);
  old["ddp_comm"] = "int8";
  CHECK_THROWS_WITH(train::TrainingArguments::from_json(old, "t.json"),
                    "t.json: training_args: key 'ddp_comm': unknown value 'int8' (expected f32, fp16 or bf16)");
}

TEST_CASE("halfgrad train refuses the ddp flags outside mpirun", "[dist][cli]") {
  testing::TempDir dir("ddp_flags");
  for (const std::string flag : {"--ddp-comm fp16", "--ddp-check-every 5"}) {
    const testing::ProgramResult r =
        testing::run_program("halfgrad", "train " + flag + " --max-steps 1 --output-dir " + dir / "out");
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.output, Catch::Contains(flag.substr(0, flag.find(' ')) + " applies to data-parallel runs"));
  }
}
