// Data-parallel training's processes over MPI (Open MPI; docs/distributed.md):
// a ProcessGroup of MPI_COMM_WORLD. Built only when CMake finds MPI
// (TRANSFUSE_HAVE_MPI).
#ifndef TRANSFUSE_RUNTIME_HOST_MPI_H
#define TRANSFUSE_RUNTIME_HOST_MPI_H

#include "runtime/host/ProcessGroup.h"

#include <memory>

namespace transfuse::rt {

class MpiGroup : public ProcessGroup {
public:
  // Initializes MPI (once per process; finalized with the last group).
  static StatusOr<std::unique_ptr<MpiGroup>> join();
  ~MpiGroup() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  // A reduce-scatter and an all-gather of buckets: rank j receives slice j
  // of a bucket from every rank, adds the slices in rank order, and the sums
  // are gathered back.
  Status sumInRankOrder(float* data, size_t count) override;
  Status sumInRankOrder(double* data, size_t count) override;
  StatusOr<bool> any(bool flag) override;
  Status barrier() override;
  // Floats per bucket of sumInRankOrder (16 MiB).
  static constexpr size_t kBucketFloats = size_t{1} << 22;

private:
  MpiGroup(int rank, int size) : rank_(rank), size_(size) {}
  int rank_, size_;
};

}  // namespace transfuse::rt

#endif  // TRANSFUSE_RUNTIME_HOST_MPI_H
