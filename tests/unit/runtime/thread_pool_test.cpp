// ThreadPool (runtime/ThreadPool.h): ranges cover [0, n) exactly once, parallel
// sums equal serial ones, many back-to-back calls, one thread, nested calls,
// concurrent callers, the chunked schedule.

#include "runtime/ThreadPool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <numeric>
#include <thread>
#include <vector>

namespace transfuse::rt {
namespace {

// Sum of f(i) over [0, n) with per-thread partial sums, each thread adding its
// indices in order; with integer data the result must equal the serial sum.
int64_t parallelSum(ThreadPool& pool, int64_t n) {
  std::vector<int64_t> partial(pool.numThreads(), 0);
  pool.parallelFor(n, [&](int64_t begin, int64_t end, int thread) {
    for (int64_t i = begin; i < end; ++i) partial[thread] += i * i % 1000;
  });
  return std::accumulate(partial.begin(), partial.end(), int64_t{0});
}

int64_t serialSum(int64_t n) {
  int64_t s = 0;
  for (int64_t i = 0; i < n; ++i) s += i * i % 1000;
  return s;
}

TEST(ThreadPool, ParallelSumEqualsSerial) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.numThreads(), threads);
    for (int64_t n : {0, 1, 2, 3, 7, 100, 100003})
      EXPECT_EQ(parallelSum(pool, n), serialSum(n)) << "threads=" << threads << " n=" << n;
  }
}

TEST(ThreadPool, StaticRangesAreContiguousAndFixed) {
  ThreadPool pool(3);
  const int64_t n = 10;
  std::vector<int> owner(n, -1);
  std::vector<int> calls(3, 0);
  pool.parallelFor(n, [&](int64_t begin, int64_t end, int thread) {
    ++calls[thread];
    for (int64_t i = begin; i < end; ++i) owner[i] = thread;
  });
  // Thread t owns [n·t/T, n·(t+1)/T): 0..2 → 0, 3..5 → 1, 6..9 → 2.
  std::vector<int> want = {0, 0, 0, 1, 1, 1, 2, 2, 2, 2};
  EXPECT_EQ(owner, want);
  EXPECT_EQ(calls, std::vector<int>({1, 1, 1}));
}

TEST(ThreadPool, ManyRepeatedCalls) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  const int kCalls = 20000;
  for (int c = 0; c < kCalls; ++c) {
    pool.parallelFor(4, [&](int64_t begin, int64_t end, int) {
      total.fetch_add(end - begin, std::memory_order_relaxed);
    });
  }
  EXPECT_EQ(total.load(), 4 * kCalls);
}

TEST(ThreadPool, CallsAfterWorkersSleep) {
  ThreadPool pool(2);
  for (int c = 0; c < 3; ++c) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // workers go to sleep
    EXPECT_EQ(parallelSum(pool, 1000), serialSum(1000));
  }
}

TEST(ThreadPool, OneThreadRunsInline) {
  ThreadPool pool(1);
  std::thread::id caller = std::this_thread::get_id();
  int calls = 0;
  pool.parallelFor(100, [&](int64_t begin, int64_t end, int thread) {
    EXPECT_EQ(std::this_thread::get_id(), caller);
    EXPECT_EQ(begin, 0);
    EXPECT_EQ(end, 100);
    EXPECT_EQ(thread, 0);
    ++calls;
  });
  EXPECT_EQ(calls, 1);
  ThreadPool zero(0);  // treated as 1
  EXPECT_EQ(zero.numThreads(), 1);
}

TEST(ThreadPool, ChunkedCoversEachIndexOnce) {
  ThreadPool pool(3);
  const int64_t n = 1001;
  std::vector<std::atomic<int>> hits(n);
  pool.parallelForChunked(n, 7, [&](int64_t begin, int64_t end, int thread) {
    EXPECT_LE(end - begin, 7);
    EXPECT_GE(thread, 0);
    EXPECT_LT(thread, 3);
    for (int64_t i = begin; i < end; ++i) hits[i].fetch_add(1);
  });
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 1) << i;
}

TEST(ThreadPool, NestedCallRunsInline) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  pool.parallelFor(2, [&](int64_t begin, int64_t end, int thread) {
    for (int64_t i = begin; i < end; ++i) {
      pool.parallelFor(10, [&](int64_t b, int64_t e, int inner) {
        EXPECT_EQ(inner, thread);
        total.fetch_add(e - b);
      });
    }
  });
  EXPECT_EQ(total.load(), 20);
}

TEST(ThreadPool, ConcurrentCallersAreSerialized) {
  ThreadPool pool(2);
  std::vector<std::thread> callers;
  std::atomic<int> bad{0};
  for (int t = 0; t < 3; ++t) {
    callers.emplace_back([&] {
      for (int c = 0; c < 500; ++c)
        if (parallelSum(pool, 257) != serialSum(257)) bad.fetch_add(1);
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace
}  // namespace transfuse::rt
