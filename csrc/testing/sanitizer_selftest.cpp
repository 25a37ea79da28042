// Sanitized builds only (TORCH_NPU_PINPOOL_SANITIZE, setup.py): the defects a sanitizer leg
// injects on purpose to prove that it catches them.
//
// Note [Injected sanitizer reports]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A sanitizer leg that reports nothing proves nothing unless it is known to catch a defect of
// the kind it looks for, in this extension, in a scenario process, as far as failing the test
// that spawned it (ci/lib/sanitize.sh, test/pinpool/test_sanitizer_injected.py). So a sanitized
// build carries one defect per sanitizer, each on the allocator's own types, reached only by
// an explicit call (inject_sanitizer_report, never from the allocator):
//   use_after_free   (address)    a PinBlock is deleted, then its graph_uses_ is read
//   data_race        (thread)     two threads add to a GraphPool's bytes_held without its lock
//   signed_overflow  (undefined)  a block's byte count overflows an int
// Only a sanitized build compiles this file (setup.py) and binds inject_sanitizer_report: the
// production extension has none of it.
#include "testing/sanitizer_selftest.h"

#include <c10/util/Exception.h>

#include <climits>
#include <thread>

#include "core/pin_pool_allocator.h"

#ifdef PINPOOL_SANITIZERS
namespace torch_npu_pinpool {

namespace {

bool built_with(const std::string& sanitizer) {
  const std::string all = std::string(",") + PINPOOL_SANITIZERS + ",";
  return all.find("," + sanitizer + ",") != std::string::npos;
}

int64_t use_after_free() {
  auto* block = new PinBlock(64, nullptr);
  PinBlock* volatile dangling = block;
  delete block;
  return static_cast<int64_t>(dangling->graph_uses_);  // heap-use-after-free
}

int64_t data_race() {
  GraphPool pool;
  auto add = [&pool] {
    for (int i = 0; i < 1000; ++i) {
      pool.bytes_held += 1;  // unlocked: the registry's mutex guards it
    }
  };
  std::thread first(add);
  std::thread second(add);
  first.join();
  second.join();
  return static_cast<int64_t>(pool.bytes_held);
}

int64_t signed_overflow() {
  volatile int bytes = INT_MAX;
  volatile int more = 1;
  return bytes + more;  // signed integer overflow
}

}  // namespace

int64_t inject_sanitizer_report(const std::string& kind) {
  struct Defect {
    const char* kind;
    const char* sanitizer;
    int64_t (*run)();
  };
  static const Defect defects[] = {{"use_after_free", "address", &use_after_free},
                                   {"data_race", "thread", &data_race},
                                   {"signed_overflow", "undefined", &signed_overflow}};
  for (const Defect& defect : defects) {
    if (kind == defect.kind) {
      TORCH_CHECK(built_with(defect.sanitizer), "torch_npu_pinpool: the injected ", kind,
                  " needs a build with TORCH_NPU_PINPOOL_SANITIZE including ", defect.sanitizer,
                  "; this one has ", PINPOOL_SANITIZERS, ".");
      return defect.run();
    }
  }
  TORCH_CHECK(false, "torch_npu_pinpool: no injected defect named '", kind,
              "' (use_after_free, data_race, signed_overflow).");
}

}  // namespace torch_npu_pinpool
#endif  // PINPOOL_SANITIZERS
