// ThreadPool (see ThreadPool.h): a generation counter announces each job;
// workers spin on it briefly, then sleep on a condition variable; the caller
// runs share 0 and spins (then yields) until the pending count reaches zero.

#include "runtime/ThreadPool.h"

#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TRANSFUSE_PAUSE() _mm_pause()
#elif defined(__aarch64__)
#define TRANSFUSE_PAUSE() asm volatile("yield")
#else
#define TRANSFUSE_PAUSE() ((void)0)
#endif

namespace transfuse::rt {
namespace {

// The pool (if any) whose job the current thread is running, and its index.
thread_local const ThreadPool* tlsPool = nullptr;
thread_local int tlsIndex = 0;

// How long an idle worker waits for the next job before sleeping, and how
// much of that (and of the caller's wait for the workers) is pure spinning;
// after it, the waiting thread also yields its CPU on each check.
//
// Why the yield: when another process keeps one CPU busy (even at nice 19),
// the scheduler may put the caller and a worker on the same CPU; a thread
// that only spins then holds the CPU the other needs until its time slice
// or kSpin ends. Measured on the 2-vCPU VM during a niced compile: an empty
// parallelFor took a median 103 µs (= kSpin) with pure spinning, 0.7 µs
// with the yields. Spinning first keeps the usual hand-off (both threads on
// their own CPUs, about 1 µs) free of system calls.
constexpr auto kSpin = std::chrono::microseconds(100);
constexpr auto kSpinPure = std::chrono::microseconds(2);

}  // namespace

ThreadPool::ThreadPool(int numThreads) : numThreads_(numThreads < 1 ? 1 : numThreads) {
  try {
    workers_.reserve(numThreads_ - 1);
    for (int i = 1; i < numThreads_; ++i) workers_.emplace_back([this, i] { workerLoop(i); });
  } catch (...) {
    stopWorkers();  // the workers already started, before the members go
    throw;
  }
}

ThreadPool::~ThreadPool() { stopWorkers(); }

void ThreadPool::stopWorkers() {
  {
    std::lock_guard<std::mutex> lock(sleepMutex_);
    stop_.store(true, std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

int ThreadPool::hardwareThreads() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

void ThreadPool::doShare(int index) {
  const ThreadPool* savedPool = tlsPool;
  int savedIndex = tlsIndex;
  tlsPool = this;
  tlsIndex = index;
  if (chunk_ == 0) {
    int64_t t = numThreads_;
    int64_t begin = n_ * index / t, end = n_ * (index + 1) / t;
    if (begin < end) fn_(ctx_, begin, end, index);
  } else {
    for (;;) {
      int64_t begin = next_.fetch_add(chunk_, std::memory_order_relaxed);
      if (begin >= n_) break;
      int64_t end = begin + chunk_ < n_ ? begin + chunk_ : n_;
      fn_(ctx_, begin, end, index);
    }
  }
  tlsPool = savedPool;
  tlsIndex = savedIndex;
}

void ThreadPool::run(int64_t n, int64_t chunk, Trampoline fn, void* ctx) {
  if (n <= 0) return;
  if (tlsPool == this) {  // nested call from inside a job: run inline
    fn(ctx, 0, n, tlsIndex);
    return;
  }
  // One thread, or a single range: run it here without waking the workers,
  // under the index the schedule gives it (static: [0, 1) belongs to T-1).
  if (numThreads_ == 1 || n == 1 || (chunk != 0 && n <= chunk)) {
    int index = (chunk == 0 && n == 1) ? numThreads_ - 1 : 0;
    std::unique_lock<std::mutex> call(callMutex_, std::defer_lock);
    if (numThreads_ > 1) call.lock();  // index may be a worker's: no overlap
    const ThreadPool* savedPool = tlsPool;
    int savedIndex = tlsIndex;
    tlsPool = this;
    tlsIndex = index;
    fn(ctx, 0, n, index);
    tlsPool = savedPool;
    tlsIndex = savedIndex;
    return;
  }
  std::lock_guard<std::mutex> call(callMutex_);
  n_ = n;
  chunk_ = chunk;
  fn_ = fn;
  ctx_ = ctx;
  next_.store(0, std::memory_order_relaxed);
  pending_.store(numThreads_ - 1, std::memory_order_relaxed);
  {
    // Bumped under sleepMutex_ so that a worker about to sleep cannot miss it.
    std::lock_guard<std::mutex> lock(sleepMutex_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();

  doShare(0);

  // Wait for the workers: spin first (they are usually about as fast), then
  // yield the CPU (a worker may be waiting for it, see kSpinPure).
  if (pending_.load(std::memory_order_acquire) != 0) {
    const auto start = std::chrono::steady_clock::now();
    bool yield = false;
    for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
      if (yield) {
        std::this_thread::yield();
      } else {
        TRANSFUSE_PAUSE();
        if ((spins & 15) == 15) yield = std::chrono::steady_clock::now() - start > kSpinPure;
      }
    }
  }
}

void ThreadPool::workerLoop(int index) {
  uint64_t seen = 0;
  for (;;) {
    // Wait for a new generation: spin for kSpin, then sleep.
    uint64_t gen = generation_.load(std::memory_order_acquire);
    if (gen == seen) {
      auto start = std::chrono::steady_clock::now();
      bool yield = false;
      for (int i = 0;; ++i) {
        if (yield)
          std::this_thread::yield();
        else
          TRANSFUSE_PAUSE();
        gen = generation_.load(std::memory_order_acquire);
        if (gen != seen) break;
        if (!yield && (i & 15) != 15) continue;
        const auto waited = std::chrono::steady_clock::now() - start;
        yield = waited > kSpinPure;
        if (waited > kSpin) {
          std::unique_lock<std::mutex> lock(sleepMutex_);
          wake_.wait(lock, [&] {
            return generation_.load(std::memory_order_acquire) != seen;
          });
          gen = generation_.load(std::memory_order_acquire);
          break;
        }
      }
    }
    seen = gen;
    if (stop_.load(std::memory_order_acquire)) return;
    doShare(index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace transfuse::rt
