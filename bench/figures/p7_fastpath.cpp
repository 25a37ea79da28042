// P7: the host allocator's eager fast path, timed with no Python in the loop.
//
// Built by bench/figures/p7_fastpath.py with torch.utils.cpp_extension.load (a plain shared
// library, no Python module) and called once per configuration through ctypes (which releases
// the GIL). Each call runs `threads` std::threads that each do `iters` rounds of
//     { at::DataPtr p = at::getHostAllocator(at::kPrivateUse1)->allocate(size); }
// i.e. allocate a pinned block and let the DataPtr die (the registered deleter frees it). The
// allocator is whatever ATen's registry holds for PrivateUse1: torch_npu's own
// (TORCH_NPU_PINPOOL=0) or torch_npu_pinpool's. One untimed round per thread first, so every
// timed round takes a cached block. Reports wall ns per round (elapsed / iters) and CPU ns
// per round (sum of the threads' CLOCK_THREAD_CPUTIME_ID / (threads * iters)).
#include <ATen/core/CachingHostAllocator.h>

#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

double thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

std::string& last_error() {
  static std::string error;
  return error;
}

}  // namespace

extern "C" {

// Returns 0 on success (wall / cpu ns per round written), 1 if an exception was thrown
// (message in p7_last_error()).
int p7_run(int64_t size, int64_t iters, int threads, double* wall_ns, double* cpu_ns) {
  at::HostAllocator* allocator = at::getHostAllocator(at::kPrivateUse1);
  if (allocator == nullptr) {
    last_error() = "no host allocator registered for PrivateUse1 (import torch_npu first)";
    return 1;
  }
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::atomic<bool> failed{false};
  std::vector<double> cpu(threads, 0.0);
  std::string error;
  std::mutex error_mutex;
  auto body = [&](int t) {
    try {
      { at::DataPtr warm = allocator->allocate(size); }
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) {
        std::this_thread::yield();
      }
      const double c0 = thread_cpu_ns();
      for (int64_t i = 0; i < iters; ++i) {
        at::DataPtr p = allocator->allocate(size);
      }
      cpu[t] = thread_cpu_ns() - c0;
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(error_mutex);
      error = e.what();
      failed.store(true);
      ready.fetch_add(1);
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(threads);
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back(body, t);
  }
  while (ready.load() < threads) {
    std::this_thread::yield();
  }
  const auto w0 = std::chrono::steady_clock::now();
  go.store(true, std::memory_order_release);
  for (auto& th : pool) {
    th.join();
  }
  const auto w1 = std::chrono::steady_clock::now();
  if (failed.load()) {
    last_error() = error;
    return 1;
  }
  double cpu_sum = 0;
  for (double c : cpu) cpu_sum += c;
  *wall_ns = std::chrono::duration<double, std::nano>(w1 - w0).count() / static_cast<double>(iters);
  *cpu_ns = cpu_sum / (static_cast<double>(iters) * threads);
  return 0;
}

const char* p7_last_error() { return last_error().c_str(); }

}  // extern "C"
