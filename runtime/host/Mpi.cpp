// See Mpi.h.
#include "runtime/host/Mpi.h"

#include <mpi.h>

#include <cstdlib>
#include <vector>

namespace transfuse::rt {
namespace {

int groups = 0;  // live MpiGroups; MPI is finalized with the last

Status check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return Status::ok();
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  return Status::error(std::string("MPI: ") + what + ": " + std::string(text, length));
}

// Rank j's slice of `count` values split among `size` ranks: [first, first + n).
void slice(size_t count, int size, int j, size_t* first, size_t* n) {
  *first = count * j / size;
  *n = count * (j + 1) / size - *first;
}

template <class T>
Status sumBuckets(T* data, size_t count, int rank, int size, MPI_Datatype type,
                  size_t bucketValues) {
  std::vector<T> received, mine;
  std::vector<int> sendCounts(size), sendOffsets(size), receiveCounts(size),
      receiveOffsets(size);
  for (size_t start = 0; start < count; start += bucketValues) {
    const size_t length = std::min(bucketValues, count - start);
    T* bucket = data + start;
    size_t myFirst = 0, myCount = 0;
    slice(length, size, rank, &myFirst, &myCount);
    // Reduce-scatter: slice j of this bucket to rank j; rank `rank`
    // receives its slice of every rank's bucket, one after another.
    for (int j = 0; j < size; ++j) {
      size_t first = 0, n = 0;
      slice(length, size, j, &first, &n);
      sendCounts[j] = static_cast<int>(n);
      sendOffsets[j] = static_cast<int>(first);
      receiveCounts[j] = static_cast<int>(myCount);
      receiveOffsets[j] = static_cast<int>(myCount * j);
    }
    received.resize(myCount * size);
    if (Status s = check(MPI_Alltoallv(bucket, sendCounts.data(), sendOffsets.data(), type,
                                       received.data(), receiveCounts.data(),
                                       receiveOffsets.data(), type, MPI_COMM_WORLD),
                         "the gradients' reduce-scatter");
        !s.isOk())
      return s;
    // The sum in rank order, left to right.
    mine.assign(received.begin(), received.begin() + myCount);
    for (int r = 1; r < size; ++r) {
      const T* from = received.data() + myCount * r;
      for (size_t i = 0; i < myCount; ++i) mine[i] += from[i];
    }
    // All-gather: every rank's summed slice into place.
    for (int j = 0; j < size; ++j) {
      size_t first = 0, n = 0;
      slice(length, size, j, &first, &n);
      receiveCounts[j] = static_cast<int>(n);
      receiveOffsets[j] = static_cast<int>(first);
    }
    if (Status s = check(MPI_Allgatherv(mine.data(), static_cast<int>(myCount), type, bucket,
                                        receiveCounts.data(), receiveOffsets.data(), type,
                                        MPI_COMM_WORLD),
                         "the gradients' all-gather");
        !s.isOk())
      return s;
  }
  return Status::ok();
}

}  // namespace

StatusOr<std::unique_ptr<MpiGroup>> MpiGroup::join() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    if (Status s = check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided),
                         "MPI_Init_thread");
        !s.isOk())
      return s;
    // Errors come back as codes (and become this process's error, which
    // ends it and so, through mpirun, the job).
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  }
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  ++groups;
  return std::unique_ptr<MpiGroup>(new MpiGroup(rank, size));
}

MpiGroup::~MpiGroup() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (--groups == 0 && !finalized) MPI_Finalize();
}

Status MpiGroup::sumInRankOrder(float* data, size_t count) {
  return sumBuckets(data, count, rank_, size_, MPI_FLOAT, kBucketFloats);
}

Status MpiGroup::sumInRankOrder(double* data, size_t count) {
  return sumBuckets(data, count, rank_, size_, MPI_DOUBLE, kBucketFloats / 2);
}

StatusOr<bool> MpiGroup::any(bool flag) {
  int in = flag ? 1 : 0, out = 0;
  if (Status s = check(MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD),
                       "agreeing to stop");
      !s.isOk())
    return s;
  return out != 0;
}

Status MpiGroup::barrier() { return check(MPI_Barrier(MPI_COMM_WORLD), "barrier"); }

}  // namespace transfuse::rt
