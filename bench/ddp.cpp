// bench_ddp: the data-parallel gradient reduction on this machine, under `mpirun -np 2`:
// for dense gradients of 2^10 .. 2^24 floats, the median time of MPI_Allgatherv alone (the
// transport, through dist::Communicator) and of DistributedDataParallel::reduce_gradients in f32
// and fp16 (the transport plus the casts and the rank-ordered sum), with the bytes each rank
// sends and the transport's bandwidth (bytes received per rank / time). Rank 0 prints one JSON
// object per size and format. bench/ddp.sh runs it with the main job's and config M's steps.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <vector>

#include "halfgrad/autograd/tensor.h"
#include "halfgrad/base/median.h"
#include "halfgrad/dist/communicator.h"
#include "halfgrad/dist/ddp.h"

namespace {

template <class F>
double time_ms(hg::dist::Communicator& comm, int repeats, F&& f) {
  std::vector<double> ms;
  for (int i = 0; i < repeats; ++i) {
    hg::dist::allgather_value(comm, i);  // start together
    const auto start = std::chrono::steady_clock::now();
    f();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  // The slowest rank's median: a collective ends when its last rank does.
  const std::vector<double> all = hg::dist::allgather_value(comm, hg::median(ms));
  return *std::max_element(all.begin(), all.end());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_ddp: gradient reduction time and loopback bandwidth (run under mpirun -np 2)"};
  int repeats = 9, max_log2 = 24;
  app.add_option("--repeats", repeats, "timed repeats per size")->check(CLI::PositiveNumber);
  app.add_option("--max-log2", max_log2, "largest gradient: 2^N floats")->check(CLI::Range(10, 26));
  CLI11_PARSE(app, argc, argv);
  hg::dist::Communicator& comm = hg::dist::world();
  const int world = comm.size();
  for (int log2 = 10; log2 <= max_log2; log2 += 2) {
    const int64_t n = int64_t{1} << log2;
    std::vector<std::byte> mine(size_t(n) * 4, std::byte{1}), all(size_t(n) * 4 * size_t(world));
    const std::vector<int64_t> counts(size_t(world), n * 4);
    const double transport = time_ms(comm, repeats, [&] { comm.allgatherv(mine, counts, all); });
    if (comm.rank() == 0) {
      const double received = double(n) * 4 * double(world - 1);
      std::printf("%s\n", nlohmann::json({{"bench", "ddp"},
                                          {"what", "allgatherv"},
                                          {"floats", n},
                                          {"ranks", world},
                                          {"ms", transport},
                                          {"bytes_sent_per_rank", n * 4},
                                          {"gb_per_s", received / (transport * 1e-3) / 1e9}})
                              .dump()
                              .c_str());
    }
    for (const hg::dist::WireFormat format : {hg::dist::WireFormat::kF32, hg::dist::WireFormat::kF16}) {
      hg::Tensor p = hg::Tensor::zeros({n});
      hg::dist::DistributedDataParallel ddp(comm, {.wire = format});
      const hg::Tensor g = hg::Tensor::full({n}, 0.5f + float(comm.rank()));
      const double reduce = time_ms(comm, repeats, [&] {
        p.set_grad(g.clone());
        ddp.reduce_gradients({p});
      });
      if (comm.rank() == 0) {
        std::printf("%s\n", nlohmann::json({{"bench", "ddp"},
                                            {"what", "reduce_gradients"},
                                            {"wire", hg::dist::wire_format_name(format)},
                                            {"floats", n},
                                            {"ranks", world},
                                            {"ms", reduce},
                                            {"bytes_sent_per_rank", ddp.last_reduce().bytes},
                                            {"buckets", ddp.last_reduce().buckets}})
                                .dump()
                                .c_str());
      }
    }
  }
  return 0;
}
