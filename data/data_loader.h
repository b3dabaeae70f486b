// DataLoader: batches of a Dataset for training and evaluation. Texts are tokenized once;
// each epoch's order is a seeded shuffle (the same for a given seed and epoch, whatever else
// happened), and each batch is padded to its longest sequence (at most max_len) with an
// attention mask (1 = real token) and the labels.
#pragma once

#include <cstdint>
#include <vector>

#include "autograd/indices.h"
#include "data/dataset.h"
#include "data/tokenizer.h"

namespace hg::data {

struct Batch {
  Indices ids;             // (B, T), 0 = padding
  Indices attention_mask;  // (B, T), 1 = real token
  Indices labels;          // (B)
  std::vector<int64_t> rows;  // the examples' positions in the dataset
  int64_t size() const { return labels.numel(); }
};

struct DataLoaderOptions {
  int64_t batch_size = 64;
  bool shuffle = true;
  bool drop_last = false;
  uint64_t seed = 0;
  int64_t max_len = 32;
};

class DataLoader {
 public:
  DataLoader(const Dataset& dataset, const Tokenizer& tokenizer, DataLoaderOptions options);

  // Selects the order of `epoch` (a permutation drawn from (seed, epoch) when shuffling).
  void set_epoch(int64_t epoch);
  int64_t num_batches() const;
  Batch batch(int64_t index) const;  // of the current epoch
  int64_t size() const { return int64_t(sequences_.size()); }
  // Texts longer than max_len that were cut (counted once, at construction).
  int64_t truncated() const { return truncated_; }
  const DataLoaderOptions& options() const { return options_; }

 private:
  DataLoaderOptions options_;
  std::vector<std::vector<int32_t>> sequences_;
  std::vector<int32_t> labels_;
  std::vector<int64_t> order_;
  int64_t truncated_ = 0;
};

}  // namespace hg::data
