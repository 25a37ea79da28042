// ForkGate: no thread is inside the allocator when the process forks.
//
// Note [Fork gate]
// ~~~~~~~~~~~~~~~~
// A child inherits every mutex as it was at the fork, held by threads it does not have. A thread
// is inside the allocator without the GIL more often than not: torch's bindings release it
// around pin_memory() and copies, and ours around frees, empty_cache and the graph hooks. Each
// call of the registered allocator (and its deleter, and each binding into the implementation,
// release_gil_in_pass) is a Pass. The prepare handler closes the gate and waits, bounded by
// kForkWait, until no Pass is inside, before it takes our locks (lock_for_fork); a thread that
// comes to the gate meanwhile waits at it until the fork is made. So no thread holds a lock of
// ours, ATen's or torch_npu's allocator's through our calls at the fork (natively a thread
// pinning at the fork may leave torch_npu's mutex locked in the child). The bound: a Pass may
// wait on torch_npu's task queue, whose thread may need the GIL the forking thread holds.
// A Pass adds no atomic read-modify-write and no fence: a thread counts its Passes in a Slot
// only it writes, then reads closed_. The prepare handler stores closed_, makes each running
// thread of the process pass a full barrier (membarrier(2), MEMBARRIER_CMD_PRIVATE_EXPEDITED),
// then reads every slot: a thread that read closed_ before its barrier had stored its count
// before it, one that read it after sees the gate closed. Without membarrier, Passes fence.
#pragma once

#include <c10/macros/Macros.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace torch_npu_pinpool {

// How long the prepare handler waits for the gate and for each lock.
inline constexpr std::chrono::milliseconds kForkWait{200};

// Polls `done` every 100 us until it holds (true) or `give_up` passes (false).
template <typename Done>
bool poll_until(Done done, std::chrono::steady_clock::time_point give_up) {
  while (!done()) {
    if (std::chrono::steady_clock::now() >= give_up) {
      return false;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return true;
}

class ForkGate {
 public:
  struct alignas(64) Slot {  // never freed: a thread's goes back to the list at the thread's exit
    std::atomic<int> inside{0};  // the thread's open Passes (they may nest)
    std::atomic<bool> taken{false};
    Slot* next = nullptr;
  };
  class Pass {
   public:
    Pass() : slot_(t_slot_ != nullptr ? t_slot_ : take_slot()) { enter(*slot_); }
    ~Pass() { add(*slot_, -1); }
    Pass(const Pass&) = delete;
    Pass& operator=(const Pass&) = delete;

   private:
    Slot* slot_;
  };

  static void start();  // at registration: ask the kernel for membarrier
  // The prepare handler: returns once no Pass is inside, or after `bound`; closed either way.
  static void close(std::chrono::milliseconds bound);
  static void open() { closed_.store(false); }
  static void open_in_child();  // the other threads' slots are free in the child

 private:
  static Slot* take_slot();
  static pthread_key_t slot_key();  // its destructor gives the slot back at the thread's exit
  static void add(Slot& slot, int n) {
    slot.inside.store(slot.inside.load(std::memory_order_relaxed) + n, std::memory_order_release);
  }
  static void enter(Slot& slot) {
    for (;;) {
      add(slot, 1);
      if (C10_LIKELY(light_.load(std::memory_order_relaxed))) {
        std::atomic_signal_fence(std::memory_order_seq_cst);  // close's membarrier orders it
      } else {
        std::atomic_thread_fence(std::memory_order_seq_cst);
      }
      if (C10_LIKELY(!closed_.load(std::memory_order_relaxed))) {
        return;
      }
      add(slot, -1);
      poll_until([] { return !closed_.load(); }, std::chrono::steady_clock::time_point::max());
    }
  }

  static inline thread_local Slot* t_slot_ = nullptr;
  static inline std::atomic<Slot*> slots_{nullptr};
  static inline std::atomic<bool> closed_{false};
  static inline std::atomic<bool> light_{false};  // membarrier registered
};

}  // namespace torch_npu_pinpool
