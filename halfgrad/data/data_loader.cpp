// Tokenize once, shuffle per epoch, pad per batch.
#include "halfgrad/data/data_loader.h"

#include <algorithm>
#include <numeric>

#include "halfgrad/autograd/generator.h"
#include "halfgrad/base/error.h"

namespace hg::data {

DataLoader::DataLoader(const Dataset& dataset, const Tokenizer& tokenizer, DataLoaderOptions options)
    : options_(options) {
  check(options.batch_size >= 1, "DataLoader: batch_size must be >= 1, got ", options.batch_size);
  check(options.max_len >= 1, "DataLoader: max_len must be >= 1, got ", options.max_len);
  check(options.num_replicas >= 1 && options.rank >= 0 && options.rank < options.num_replicas, "DataLoader: rank ",
        options.rank, " of ", options.num_replicas, " replicas");
  check(!dataset.examples.empty(), dataset.source, ": the data set is empty");
  for (const Example& e : dataset.examples) {
    bool cut = false;
    sequences_.push_back(tokenizer.encode(e.text, options.max_len, &cut));
    check(!sequences_.back().empty(), dataset.source, ": example ", sequences_.size(),
          " has no tokens (an empty text, or nothing the ", kTokenizerKindNames.name(tokenizer.config().kind),
          " tokenizer keeps)");
    truncated_ += cut;
    labels_.push_back(e.label);
  }
  set_epoch(0);
}

void group_by_length(std::vector<int64_t>& order, const std::vector<int64_t>& lengths, int64_t batch_size) {
  const int64_t n = int64_t(order.size());
  if (n == 0) return;
  const int64_t mult = std::max<int64_t>(1, std::min<int64_t>(n / (4 * batch_size), 50));
  const int64_t mega = mult * batch_size;
  auto longer = [&](int64_t a, int64_t b) { return lengths[size_t(a)] > lengths[size_t(b)]; };
  for (int64_t begin = 0; begin < n; begin += mega) {
    std::stable_sort(order.begin() + begin, order.begin() + std::min(n, begin + mega), longer);
  }
  // The first element of the mega-batch with the longest text (HF: argmax, so the first such).
  int64_t best = 0;
  for (int64_t begin = mega; begin < n; begin += mega) {
    if (longer(order[size_t(begin)], order[size_t(best)])) best = begin;
  }
  std::swap(order[0], order[size_t(best)]);
}

void DataLoader::set_epoch(int64_t epoch) {
  order_.resize(sequences_.size());
  std::iota(order_.begin(), order_.end(), 0);
  if (options_.shuffle) {
    Generator gen(options_.seed, uint64_t(epoch) << 40);
    for (size_t i = order_.size(); i > 1; --i) std::swap(order_[i - 1], order_[gen.next_u32() % i]);
    if (options_.group_by_length) {
      std::vector<int64_t> lengths(sequences_.size());
      for (size_t i = 0; i < lengths.size(); ++i) lengths[i] = int64_t(sequences_[i].size());
      // The global batch: each rank's batch of batch_size is every num_replicas-th of these.
      group_by_length(order_, lengths, options_.batch_size * options_.num_replicas);
    }
  }
  const size_t replicas = size_t(options_.num_replicas);
  if (replicas == 1) return;
  const size_t n = order_.size(), padded = (n + replicas - 1) / replicas * replicas;
  for (size_t i = n; i < padded; ++i) order_.push_back(order_[i - n]);  // n >= 1: wraps as needed
  std::vector<int64_t> shard;
  for (size_t i = size_t(options_.rank); i < padded; i += replicas) shard.push_back(order_[i]);
  order_ = std::move(shard);
}

int64_t DataLoader::num_batches() const {
  const int64_t n = shard_size(), b = options_.batch_size;
  return options_.drop_last ? n / b : (n + b - 1) / b;
}

Batch DataLoader::batch(int64_t index) const {
  check(index >= 0 && index < num_batches(), "DataLoader: batch ", index, " of ", num_batches());
  const int64_t begin = index * options_.batch_size;
  const int64_t end = std::min(shard_size(), begin + options_.batch_size);
  Batch b;
  int64_t longest = 0;
  for (int64_t i = begin; i < end; ++i)
    longest = std::max<int64_t>(longest, int64_t(sequences_[size_t(order_[size_t(i)])].size()));
  const int64_t rows = end - begin;
  std::vector<int32_t> ids(size_t(rows * longest), 0), mask(size_t(rows * longest), 0), labels;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t row = order_[size_t(begin + r)];
    const std::vector<int32_t>& s = sequences_[size_t(row)];
    std::copy(s.begin(), s.end(), ids.begin() + r * longest);
    std::fill(mask.begin() + r * longest, mask.begin() + r * longest + int64_t(s.size()), 1);
    labels.push_back(labels_[size_t(row)]);
    b.rows.push_back(row);
  }
  b.ids = Indices(std::move(ids), {rows, longest});
  b.attention_mask = Indices(std::move(mask), {rows, longest});
  b.labels = Indices(std::move(labels), {rows});
  return b;
}

}  // namespace hg::data
