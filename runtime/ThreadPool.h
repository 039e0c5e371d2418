// ThreadPool: the runtime's fixed-size pool of worker threads for data-parallel
// loops (GEMM, attention, row kernels).
//
//   ThreadPool pool(2);                       // the caller + 1 worker thread
//   pool.parallelFor(n, [&](int64_t begin, int64_t end, int thread) { ... });
//
// Model: a pool of T threads is the calling thread (index 0) plus T-1 workers
// (indices 1..T-1) started by the constructor and joined by the destructor.
// parallelFor splits [0, n) and calls fn(begin, end, threadIndex) on the caller
// and the workers; it returns when every range is done. fn must not throw.
//
// Scheduling:
//   parallelFor(n, fn)              static: thread t gets the one contiguous
//       range [n·t/T, n·(t+1)/T) (skipped when empty). The mapping from index to
//       thread is fixed, so results may depend on it deterministically, and a
//       thread index can select per-thread scratch.
//   parallelForChunked(n, c, fn)    dynamic: threads take ranges of c indices
//       (the last one shorter) from a shared counter until none are left; fn is
//       called once per chunk. For uneven work.
//
// Cost: no allocation per call (fn is type-erased by reference, the job lives
// in the pool). Idle workers wait about 100 µs for the next loop, then sleep on
// a condition variable, so back-to-back loops do not pay a wake-up. Waiting
// threads (idle workers, and the caller waiting for the workers) spin for 2 µs,
// then yield the CPU on every check: on a machine with other load the caller
// and a worker may share a CPU, and pure spinning then cost ~100 µs a loop.
//
// Concurrency: parallelFor may be called from several threads on one pool; the
// calls are serialized by a mutex (each one still uses every thread). A call
// made from inside fn (nested, on any thread of the same pool) runs the whole
// range inline on that thread, as fn(0, n, thatThreadIndex), instead of
// deadlocking. Destroying the pool while a call is in flight is an error.
#ifndef TRANSFUSE_RUNTIME_THREADPOOL_H
#define TRANSFUSE_RUNTIME_THREADPOOL_H

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace transfuse::rt {

class ThreadPool {
public:
  // numThreads >= 1 counts the caller: numThreads - 1 workers are started.
  // Values < 1 are treated as 1.
  explicit ThreadPool(int numThreads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int numThreads() const { return numThreads_; }

  // The number of hardware threads (std::thread::hardware_concurrency, >= 1).
  static int hardwareThreads();

  // Static schedule (see the file comment). fn(int64_t begin, int64_t end,
  // int threadIndex). n <= 0 calls nothing.
  template <class Fn>
  void parallelFor(int64_t n, Fn&& fn) {
    using F = std::remove_reference_t<Fn>;
    run(n, /*chunk=*/0, &trampoline<F>, const_cast<void*>(static_cast<const void*>(&fn)));
  }

  // Dynamic schedule in chunks of `chunk` (>= 1) indices.
  template <class Fn>
  void parallelForChunked(int64_t n, int64_t chunk, Fn&& fn) {
    using F = std::remove_reference_t<Fn>;
    run(n, chunk < 1 ? 1 : chunk, &trampoline<F>,
        const_cast<void*>(static_cast<const void*>(&fn)));
  }

private:
  using Trampoline = void (*)(void* ctx, int64_t begin, int64_t end, int thread);
  template <class F>
  static void trampoline(void* ctx, int64_t begin, int64_t end, int thread) {
    (*static_cast<F*>(ctx))(begin, end, thread);
  }

  void run(int64_t n, int64_t chunk, Trampoline fn, void* ctx);
  void workerLoop(int index);
  void stopWorkers();  // wakes and joins every started worker
  void doShare(int index);  // runs thread `index`'s share of the current job

  int numThreads_;
  std::vector<std::thread> workers_;

  std::mutex callMutex_;  // serializes parallelFor calls from several threads

  // The current job; written by the caller before generation_ is bumped.
  int64_t n_ = 0;
  int64_t chunk_ = 0;  // 0: static schedule
  Trampoline fn_ = nullptr;
  void* ctx_ = nullptr;
  alignas(64) std::atomic<int64_t> next_{0};  // chunked schedule: next index

  alignas(64) std::atomic<uint64_t> generation_{0};  // bumped once per job
  alignas(64) std::atomic<int> pending_{0};          // workers not yet done
  std::atomic<bool> stop_{false};
  std::mutex sleepMutex_;
  std::condition_variable wake_;
};

}  // namespace transfuse::rt

#endif  // TRANSFUSE_RUNTIME_THREADPOOL_H
