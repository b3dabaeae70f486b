// Communicator: the processes of one data-parallel job and the two collectives halfgrad needs
// from them -- every rank's bytes gathered on every rank (allgatherv), and ending the whole job
// (abort) -- with two implementations: one process (always built) and MPI (built with the
// HALFGRAD_MPI CMake option, used when the program runs under mpirun). Everything else
// (agreement on errors and flags, the gradient reduction of ddp.h) is built on allgatherv, so
// every rank computes it from the same gathered bytes in the same order: the results are
// identical on every rank, bit for bit, whatever the MPI library does inside.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hg::dist {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // A collective (every rank calls it, in the same order): rank r contributes counts[r] bytes
  // (`mine`), and `out` (the sum of counts) receives every rank's bytes in rank order. `counts`
  // must be the same on every rank.
  virtual void allgatherv(std::span<const std::byte> mine, std::span<const int64_t> counts,
                          std::span<std::byte> out) = 0;
  // Ends every process of the job with `code` (MPI_Abort): for an error on one rank while the
  // others may be waiting in a collective, which would otherwise hang.
  [[noreturn]] virtual void abort(int code) = 0;

  // Set by agree() and check_same() before they throw: every rank threw the same error, so
  // the program can exit normally (rank 0 printing it) instead of aborting the job.
  bool failure_agreed() const { return failure_agreed_; }
  void set_failure_agreed() { failure_agreed_ = true; }

 private:
  bool failure_agreed_ = false;
};

// One process: rank 0 of 1.
class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void allgatherv(std::span<const std::byte> mine, std::span<const int64_t> counts, std::span<std::byte> out) override;
  [[noreturn]] void abort(int code) override;
};

// The job this process belongs to: the MPI communicator when launched by mpirun/mpiexec (seen in
// the launcher's environment: OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_RANK) and built with
// HALFGRAD_MPI, else one process. Created on first use (MPI_Init); MPI_Finalize runs at exit.
// Throws hg::Error when launched under mpirun with several processes by a build without MPI
// (each would train alone and write the same output directory).
Communicator& world();

// Every rank's bytes, in rank order (two allgathervs: the sizes, then the bytes).
std::vector<std::vector<std::byte>> allgather(Communicator& comm, std::span<const std::byte> mine);

// Every rank's value of a trivially copyable T, in rank order.
template <class T>
std::vector<T> allgather_value(Communicator& comm, const T& value) {
  std::vector<int64_t> counts(size_t(comm.size()), int64_t(sizeof(T)));
  std::vector<T> out(size_t(comm.size()));
  comm.allgatherv(std::as_bytes(std::span(&value, 1)), counts, std::as_writable_bytes(std::span(out)));
  return out;
}

// Throws hg::Error with `message` after marking the failure agreed: for a failure every rank
// finds at the same point (after a collective that told them all), so none waits for the others.
[[noreturn]] void fail_agreed(Communicator& comm, const std::string& message);

// Runs `body` on every rank, then agrees: if it threw on any rank, it throws hg::Error on every
// rank with the message of the lowest failing rank ("rank 1: <message>" when there are several
// ranks) and marks the failure agreed. For steps that can fail on some ranks only (reading a
// file, parsing flags) before any collective that would wait for the failed rank.
void agree(Communicator& comm, const std::function<void()>& body);

// Throws hg::Error on every rank (agreed) unless `value` is the same on every rank, naming
// `what` and the first key whose value differs, with rank 0's value and the differing rank's.
void check_same(Communicator& comm, const nlohmann::json& value, const std::string& what);

}  // namespace hg::dist
