// The MPI communicator (MPI_COMM_WORLD), compiled only with the CMake option HALFGRAD_MPI.
// MPI is called from the main thread only (MPI_THREAD_FUNNELED); OpenMP threads never call it.
#include <mpi.h>

#include <climits>
#include <cstdio>
#include <limits>

#include "halfgrad/base/error.h"
#include "halfgrad/dist/communicator.h"

namespace hg::dist {

namespace {

void check_mpi(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  fail("MPI: ", call, " failed: ", std::string(text, size_t(length)));
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
      owns_init_ = true;
    }
    // Errors come back as codes (check_mpi turns them into hg::Error) instead of aborting silently.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owns_init_ && !finalized) MPI_Finalize();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void allgatherv(std::span<const std::byte> mine, std::span<const int64_t> counts, std::span<std::byte> out) override {
    check(int64_t(counts.size()) == size_ && counts[size_t(rank_)] == int64_t(mine.size()),
          "MPI allgatherv: counts do not match the buffers");
    std::vector<int> sizes(counts.size()), displacements(counts.size());
    int64_t at = 0;
    for (size_t r = 0; r < counts.size(); ++r) {
      // MPI counts are int: the callers split larger buffers (ddp.h's buckets).
      check(counts[r] >= 0 && counts[r] <= INT_MAX && at <= INT_MAX, "MPI allgatherv: ", counts[r], " bytes from rank ",
            r, " at offset ", at, " exceed MPI's int counts");
      sizes[r] = int(counts[r]);
      displacements[r] = int(at);
      at += counts[r];
    }
    check(at == int64_t(out.size()), "MPI allgatherv: the output holds ", out.size(), " bytes, the ranks send ", at);
    check_mpi(MPI_Allgatherv(mine.data(), int(mine.size()), MPI_BYTE, out.data(), sizes.data(), displacements.data(),
                             MPI_BYTE, MPI_COMM_WORLD),
              "MPI_Allgatherv");
  }

  [[noreturn]] void abort(int code) override {
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);  // MPI_Abort does not return; this satisfies [[noreturn]]
  }

 private:
  int rank_ = 0, size_ = 1;
  bool owns_init_ = false;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator() { return std::make_unique<MpiCommunicator>(); }

}  // namespace hg::dist
