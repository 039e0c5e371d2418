// The processes of a data-parallel training run, as the Trainer needs them
// (docs/distributed.md): their number and this one's rank, sums in a fixed
// order, agreement. MpiGroup (runtime/host/Mpi.h) implements it
// over MPI; a one-process run has none.
//
// Determinism: every sum adds the ranks' values in rank order, left to right
// (((v0 + v1) + v2) + ...), whatever the transport does inside, so every rank
// gets the bits a single process gets adding the same values in that order.
#ifndef TRANSFUSE_RUNTIME_HOST_PROCESSGROUP_H
#define TRANSFUSE_RUNTIME_HOST_PROCESSGROUP_H

#include "runtime/Status.h"

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstdint>
#include <string>

namespace transfuse::rt {

class ProcessGroup {
public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Replaces `count` values on every rank by their sum over the ranks, in
  // rank order.
  virtual Status sumInRankOrder(float* data, size_t count) = 0;
  virtual Status sumInRankOrder(double* data, size_t count) = 0;
  // True on every rank when `flag` is true on any (a stop every rank obeys).
  virtual StatusOr<bool> any(bool flag) = 0;
  virtual Status barrier() = 0;
};

// The number of processes an MPI launcher (mpirun) started this one among,
// from its environment (OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_SIZE); 1
// outside one. Needs no MPI, so that a build without it can say so.
inline int launchedRanks() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"})
    if (const char* v = std::getenv(name); v && *v) return std::max(1, std::atoi(v));
  return 1;
}

}  // namespace transfuse::rt

#endif  // TRANSFUSE_RUNTIME_HOST_PROCESSGROUP_H
