// Data-parallel training across MPI ranks (halfgrad/dist/ddp.h, the Accelerator and the Trainer under
// several processes). Run by ctest as `mpiexec -n 2 test_ddp <test>`; a plain program rather
// than the Catch2 binary because every rank must reach every collective: a failed expectation
// is counted (never thrown past a collective), the ranks' counts are gathered at the end, and
// an unexpected exception aborts the job (MPI_Abort) instead of leaving the other rank waiting.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "halfgrad/autograd/all_ops.h"
#include "halfgrad/autograd/sparse_rows.h"
#include "halfgrad/base/fingerprint.h"
#include "halfgrad/data/data_loader.h"
#include "halfgrad/data/dataset.h"
#include "halfgrad/data/tokenizer.h"
#include "halfgrad/dist/communicator.h"
#include "halfgrad/dist/ddp.h"
#include "halfgrad/io/checkpoint.h"
#include "halfgrad/nn/text_classifier.h"
#include "halfgrad/optim/adam.h"
#include "halfgrad/precision/arithmetic.h"
#include "halfgrad/precision/float_format.h"
#include "halfgrad/train/accelerator.h"
#include "halfgrad/train/trainer.h"

namespace {

using namespace hg;

int failures = 0;

void expect(bool ok, const std::string& what) {
  if (ok) return;
  ++failures;
  std::fprintf(stderr, "rank %d: FAILED: %s\n", dist::world().rank(), what.c_str());
}

uint32_t bits_of(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

// The documented reduction of ddp.h for two ranks, from precision/'s exact scalar arithmetic:
// each rank's g / 2 in f32, rounded once to `format`, then 0 + c0 + c1 with each addition rounded
// to `format`.
float oracle_16bit(precision::FloatFormat format, float g0, float g1) {
  const uint32_t c0 = precision::encode(format, double(g0 / 2.0f)), c1 = precision::encode(format, double(g1 / 2.0f));
  const uint32_t sum = precision::add_bits(format, precision::add_bits(format, 0u, c0), c1);
  return precision::decode(format, sum);
}

// Every rank's gradients are functions of (rank, index), so each rank can compute the others'.
float dense_value(int rank, int64_t i) {
  if (i == 0) return rank == 0 ? 70000.0f : -10000.0f;  // g / 2 fits fp16; cast first (torch's order) would not
  if (i == 1) return rank == 0 ? 1e-5f : 3e-5f;         // fp16 subnormals after the division
  return std::ldexp(float((i * 37 + rank * 11) % 101) - 50.0f, -int(i % 9)) * (1.0f + 0.001f * float(i));
}

float sparse_value(int rank, int64_t row, int64_t col) {
  return 0.25f * float(row) - 0.5f * float(col) + float(rank) * 0.1f;
}

// --ddp-comm f32 | fp16 | bf16: the reduced dense and row-sparse gradients equal the documented
// order's result bit for bit, and are identical on every rank.
void test_reduce() {
  dist::Communicator& comm = dist::world();
  const int rank = comm.rank();
  for (const dist::WireFormat format : {dist::WireFormat::kF32, dist::WireFormat::kF16, dist::WireFormat::kBf16}) {
    const std::string name = dist::wire_format_name(format);
    const int64_t n = 600;  // 2400 bytes in f32, 1200 in 16 bits: several 1 KiB buckets
    Tensor dense = Tensor::zeros({n}), table = Tensor::zeros({10, 4});
    dense.set_name("dense");
    table.set_name("table");
    std::vector<float> g(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) g[size_t(i)] = dense_value(rank, i);
    dense.set_grad(Tensor::from_vector(g, {n}));
    const std::vector<int64_t> rows = rank == 0 ? std::vector<int64_t>{1, 3, 5} : std::vector<int64_t>{3, 4};
    std::vector<float> rv;
    for (int64_t r : rows) {
      for (int64_t c = 0; c < 4; ++c) rv.push_back(sparse_value(rank, r, c));
    }
    table.set_sparse_grad({rows, Tensor::from_vector(rv, {int64_t(rows.size()), 4})});
    // A small bucket, so the values travel in several allgathervs.
    dist::DistributedDataParallel ddp(comm, {.wire = format, .bucket_bytes = 1024});
    ddp.reduce_gradients({dense, table});
    expect(ddp.last_reduce().buckets >= 2, name + ": several buckets");

    auto expected = [&](float g0, float g1) {
      if (format == dist::WireFormat::kF32) return (0.0f + g0 / 2.0f) + g1 / 2.0f;
      return oracle_16bit(format == dist::WireFormat::kF16 ? precision::kBinary16 : precision::kBFloat16, g0, g1);
    };
    const std::vector<float> got = dense.grad().to_vector();
    for (int64_t i = 0; i < n; ++i) {
      const float want = expected(dense_value(0, i), dense_value(1, i));
      expect(bits_of(got[size_t(i)]) == bits_of(want), name + ": dense element " + std::to_string(i) + " is " +
                                                           std::to_string(got[size_t(i)]) + ", expected " +
                                                           std::to_string(want));
    }
    // 70000 and -10000: cast first (torch's order) 70000 would be inf; divided first, 35000 and
    // -5000 fit, and the mean 30000 arrives within two roundings (fp16's spacing is 32 at 35000,
    // 16 at 30000) of its value.
    if (format == dist::WireFormat::kF16) {
      expect(std::isinf(precision::decode(precision::kBinary16, precision::encode(precision::kBinary16, 70000.0))),
             "fp16: casting 70000 first overflows");
      expect(std::isfinite(got[0]) && std::fabs(got[0] - 30000.0f) <= 32.0f,
             "fp16: the large element survives, got " + std::to_string(got[0]));
    }
    const SparseRows* s = table.sparse_grad();
    expect(s != nullptr && s->rows == std::vector<int64_t>({1, 3, 4, 5}), name + ": the union of the ranks' rows");
    if (s != nullptr && s->rows.size() == 4) {
      const std::vector<float> v = s->values.to_vector();
      for (size_t k = 0; k < 4; ++k) {
        const int64_t row = s->rows[k];
        for (int64_t c = 0; c < 4; ++c) {
          // A row a rank does not have counts as zero there.
          const float g0 = row == 4 ? 0.0f : sparse_value(0, row, c),
                      g1 = row == 3 || row == 4 ? sparse_value(1, row, c) : 0.0f;
          const float want = expected(g0, g1);
          expect(bits_of(v[k * 4 + size_t(c)]) == bits_of(want), name + ": sparse row " + std::to_string(row));
        }
      }
    }
    // Identical bits on every rank.
    const auto fingerprints = dist::allgather_value(comm, fnv1a(dense.grad().bytes(), dense.grad().nbytes()));
    expect(fingerprints[0] == fingerprints[1], name + ": both ranks hold the same reduced gradient");
  }
}

// Tiny gradients (2^-27 on both ranks): sent unscaled, g / 2 = 2^-28 is below half fp16's least
// subnormal (2^-24 / 2) and the cast flushes every one (counted as underflow, as the numerics
// inspector counts a cast); multiplied by a loss scale of 2^16 first, as the reduction runs
// before unscaling, they are normal fp16 values, none flushes, and unscaling gives 2^-27 back.
void test_scaled_gradients_survive_the_wire() {
  dist::Communicator& comm = dist::world();
  const int64_t n = 100;
  const float tiny = 0x1p-27f, scale = 65536.0f;
  for (const bool scaled : {false, true}) {
    Tensor p = Tensor::zeros({n});
    p.set_grad(Tensor::full({n}, scaled ? tiny * scale : tiny));
    dist::DistributedDataParallel ddp(comm, {.wire = dist::WireFormat::kF16});
    ddp.reduce_gradients({p});
    const precision::NumericsStats& wire = ddp.last_reduce().wire;
    expect(wire.total() == uint64_t(n), "the cast saw every value");
    const std::vector<float> g = p.grad().to_vector();
    if (scaled) {
      expect(wire.underflow == 0, "scaled: nothing flushed, got " + std::to_string(wire.underflow));
      expect(g[0] / scale == tiny, "scaled: the unscaled mean is the gradient");
    } else {
      expect(wire.underflow == uint64_t(n), "unscaled: every value flushed, got " + std::to_string(wire.underflow));
      expect(g[0] == 0.0f, "unscaled: the mean arrives as zero");
    }
  }
}

nn::ClassifierConfig tiny_config(const data::TokenizerConfig& tokenizer, float dropout) {
  nn::ClassifierConfig c;
  c.vocab = data::Tokenizer(tokenizer).vocab_size();
  c.position_embedding = nn::PositionEmbedding::kNone;
  c.sparse_embedding = true;
  c.max_len = 32;
  c.d_model = 16;
  c.heads = 2;
  c.d_ff = 32;
  c.layers = 0;
  c.classes = 7;
  c.dropout = dropout;
  return c;
}

data::TokenizerConfig ngram_tokenizer() {
  data::TokenizerConfig t;
  t.kind = data::TokenizerKind::kCharNgrams;
  t.buckets = 1024;
  return t;
}

// fp16 O2: rank 1's loss is multiplied by 1e6, so its f16 gradients overflow; rank 0's are
// finite. Both ranks skip the step, keep their weights and halve the scale.
void test_inf_on_one_rank_skips_everywhere() {
  dist::Communicator& comm = dist::world();
  const data::TokenizerConfig tok = ngram_tokenizer();
  nn::TextClassifier model(tiny_config(tok, 0.0f), 1);
  optim::AdamW optimizer({{model.parameters(), 1e-2f, 0.0f}});
  train::Accelerator acc({.mixed_precision = {.precision = optim::Precision::kFp16}});
  acc.prepare(model, optimizer);
  expect(acc.num_processes() == 2 && acc.process_index() == comm.rank() && acc.is_main_process() == (comm.rank() == 0),
         "the accelerator sees the job");
  const uint64_t before = model.fingerprint();
  const float scale = acc.mixed_precision().scaler().get_scale();
  const data::Split split = data::language_id_dataset({.train_per_language = 4, .test_per_language = 1, .seed = 0});
  data::DataLoader loader(split.train, data::Tokenizer(tok), {.batch_size = 8, .max_len = 32});
  const data::Batch batch = loader.batch(0);
  Tensor loss;
  {
    Autocast guard = acc.autocast();
    loss = cross_entropy(model.forward(batch.ids, batch.attention_mask), batch.labels);
  }
  acc.backward(comm.rank() == 1 ? mul_scalar(loss, 1e6f) : loss);
  bool finite = true;
  for (const Tensor& p : model.parameters()) finite = finite && (!p.has_grad() || p.grad_values().all_finite());
  expect(finite == (comm.rank() == 0), "only rank 1's own gradients hold inf");
  const bool stepped = acc.step();
  expect(!stepped, "the step is skipped on rank " + std::to_string(comm.rank()));
  expect(acc.mixed_precision().scaler().get_scale() == scale / 2, "the scale is halved");
  expect(model.fingerprint() == before, "the weights are unchanged");
}

// The replica check compares the run's state (Accelerator::state_dict) across the ranks: equal
// replicas pass; a master weight or the dropout generator changed on rank 1 alone stops both
// ranks, naming the part.
void test_replica_check_names_the_diverged_part() {
  dist::Communicator& comm = dist::world();
  const data::TokenizerConfig tok = ngram_tokenizer();
  nn::TextClassifier model(tiny_config(tok, 0.1f), 1);
  optim::AdamW optimizer({{model.parameters(), 1e-2f, 0.0f}});
  train::Accelerator acc({.mixed_precision = {.precision = optim::Precision::kFp16}});
  acc.prepare(model, optimizer);
  acc.register_generator("dropout", *model.dropout_gen);
  auto error_of = [&](int64_t step) {
    try {
      acc.check_replicas(step);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  expect(error_of(1) == "(no error)", "identical replicas pass");
  const auto [name, weight] = acc.mixed_precision().optimizer_parameters().back();  // an f32 master
  const std::vector<float> before = weight.to_vector();
  if (comm.rank() == 1) {
    std::vector<float> changed = before;
    changed[0] += 1.0f;
    weight.assign_nearest(changed);
  }
  const std::string master = error_of(2);
  expect(master == "replica check at step 2: tensor 'master " + name +
                       "' on rank 1 differs from rank 0's: the "
                       "replicas have diverged",
         "a changed master weight is named, got: " + master);
  weight.assign_nearest(before);
  if (comm.rank() == 1) *model.dropout_gen = Generator(model.dropout_gen->seed(), model.dropout_gen->offset() + 1);
  const std::string rng = error_of(3);
  expect(rng == "replica check at step 3: the state 'rng' on rank 1 differs from rank 0's: the replicas have diverged",
         "a changed dropout generator is named, got: " + rng);
}

// A shared scratch directory: rank 0's name, removed by rank 0 at the end.
std::string shared_dir(const std::string& name) {
  dist::Communicator& comm = dist::world();
  std::string path =
      (std::filesystem::temp_directory_path() / ("halfgrad_mpi_" + name + "_" + std::to_string(::getpid()))).string();
  const auto all = dist::allgather(comm, std::as_bytes(std::span(path.data(), path.size())));
  path.assign(reinterpret_cast<const char*>(all[0].data()), all[0].size());
  if (comm.rank() == 0) std::filesystem::remove_all(path);
  return path;
}

struct Run {
  std::vector<float> weights;  // every optimizer parameter (the f32 masters in O2), concatenated
  int64_t first_step = 0, last_step = 0;
};

// The language-id set's 280 training texts, read from the word lists once per process.
const data::Split& small_split() {
  static const data::Split split =
      data::language_id_dataset({.train_per_language = 40, .test_per_language = 10, .seed = 0});
  return split;
}

// A Trainer run on small_split() (char n-grams, sparse embedding).
Run train_run(dist::Communicator& comm, int64_t batch, const std::string& precision, float dropout,
              const std::string& output_dir, int64_t save_steps, const std::string& resume = "") {
  const data::TokenizerConfig tok = ngram_tokenizer();
  const data::Split& split = small_split();
  nn::TextClassifier model(tiny_config(tok, dropout), 3);
  train::TrainingArguments args;
  args.output_dir = output_dir;
  args.max_steps = 20;
  args.per_device_train_batch_size = batch;
  args.learning_rate = 1e-2f;
  args.warmup_steps = 3;
  args.logging_steps = 5;
  args.save_strategy = save_steps > 0 ? train::IntervalStrategy::kSteps : train::IntervalStrategy::kNo;
  args.save_steps = save_steps > 0 ? save_steps : 500;
  args.seed = 0;
  args.tokenizer = tok;
  args.mixed_precision = optim::parse_mixed_precision(precision);
  args.ddp_check_every = comm.size() > 1 ? 5 : 0;
  train::Trainer trainer(model, args, split.train, nullptr, {}, {}, &comm);
  Run run;
  run.first_step = resume.empty() ? 0 : io::load_checkpoint(resume).trainer_state.at("global_step").get<int64_t>();
  trainer.train(resume);
  run.last_step = trainer.state().global_step;
  for (const auto& [name, t] : trainer.accelerator().mixed_precision().optimizer_parameters()) {
    const std::vector<float> v = t.to_vector();
    run.weights.insert(run.weights.end(), v.begin(), v.end());
  }
  return run;
}

// f32: 2 ranks x batch 8 against 1 process x batch 16 (the loader's shards make their batches
// the same 16 texts) after 20 steps, and two 2-rank runs bit for bit.
void test_matches_single_process() {
  dist::Communicator& comm = dist::world();
  dist::LocalCommunicator alone;
  const std::string dir = shared_dir("match");
  const Run two = train_run(comm, 8, "fp32", 0.0f, dir + "/a", 0);
  const Run again = train_run(comm, 8, "fp32", 0.0f, dir + "/b", 0);
  expect(two.weights == again.weights, "two 2-rank runs give the same bits");
  if (comm.rank() == 0) {
    const Run one = train_run(alone, 16, "fp32", 0.0f, dir + "/c", 0);
    // The two runs differ only in f32 rounding: the single process sums a batch's 16 per-text
    // gradients in one pass, the ranks sum 8 each and the reduction adds the two halves, so
    // each gradient element differs by a few ulps (~1e-6 relative at most). AdamW's update
    // lr x m / sqrt(v) changes by about the same relative amount, 1e-2 x 1e-6 = 1e-8 a step, so
    // after 20 steps the weights are ~2e-7 apart; 1e-5 leaves a factor 50 for elements whose
    // gradient nearly cancels, where m / sqrt(v) is most sensitive.
    double worst = 0;
    for (size_t i = 0; i < one.weights.size() && i < two.weights.size(); ++i) {
      worst = std::max(worst, double(std::fabs(one.weights[i] - two.weights[i])));
    }
    std::printf("largest weight difference, 2 ranks x 8 vs 1 process x 16 after 20 steps: %.3g\n", worst);
    expect(one.weights.size() == two.weights.size() && worst <= 1e-5, "within 1e-5 of the single process");
    expect(worst > 0 || one.weights == two.weights, "the comparison ran");
    std::filesystem::remove_all(dir);
  }
}

// fp16 O2 with dropout: a checkpoint written by 2 ranks resumes on 2 ranks bit for bit, and on
// 1 process (batch 2B) from the same step to the end.
void test_checkpoint_resume() {
  dist::Communicator& comm = dist::world();
  const std::string dir = shared_dir("resume");
  const Run full = train_run(comm, 8, "fp16", 0.1f, dir + "/full", 10);
  const std::string checkpoint = dir + "/full/checkpoint-10";
  expect(io::checkpoint_complete(checkpoint), "rank 0 wrote checkpoint-10");
  const Run resumed = train_run(comm, 8, "fp16", 0.1f, dir + "/resumed", 0, checkpoint);
  expect(resumed.first_step == 10 && resumed.last_step == 20, "the 2-rank resume runs steps 11 to 20");
  expect(resumed.weights == full.weights, "the 2-rank resume ends on the uninterrupted run's bits");
  if (comm.rank() == 0) {
    dist::LocalCommunicator alone;
    const Run single = train_run(alone, 16, "fp16", 0.1f, dir + "/single", 0, checkpoint);
    bool finite = true;
    for (float w : single.weights) finite = finite && std::isfinite(w);
    expect(single.first_step == 10 && single.last_step == 20 && finite, "one process resumes the 2-rank checkpoint");
    std::filesystem::remove_all(dir);
  }
}

const std::map<std::string, std::function<void()>> kTests = {
    {"reduce", test_reduce},
    {"scaled_gradients_survive_the_wire", test_scaled_gradients_survive_the_wire},
    {"inf_on_one_rank_skips_everywhere", test_inf_on_one_rank_skips_everywhere},
    {"matches_single_process", test_matches_single_process},
    {"checkpoint_resume", test_checkpoint_resume},
    {"replica_check_names_the_diverged_part", test_replica_check_names_the_diverged_part},
};

}  // namespace

int main(int argc, char** argv) {
  dist::Communicator& comm = hg::dist::world();
  if (comm.size() != 2) {
    std::fprintf(stderr, "test_ddp: run under mpiexec -n 2 (this job has %d processes)\n", comm.size());
    return 2;
  }
  const auto it = argc == 2 ? kTests.find(argv[1]) : kTests.end();
  if (it == kTests.end()) {
    std::fprintf(stderr, "usage: mpiexec -n 2 test_ddp TEST, TEST one of:");
    for (const auto& [name, test] : kTests) std::fprintf(stderr, " %s", name.c_str());
    std::fprintf(stderr, "\n");
    return 2;
  }
  try {
    it->second();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: unexpected error: %s\n", comm.rank(), e.what());
    comm.abort(1);
  }
  const std::vector<int> all = dist::allgather_value(comm, failures);
  const int total = all[0] + all[1];
  if (comm.rank() == 0) std::printf("%s: %s (%d failed expectations)\n", argv[1], total ? "FAILED" : "passed", total);
  return total ? 1 : 0;
}
