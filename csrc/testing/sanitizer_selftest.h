// Sanitized builds only: the defects injected on purpose
// (Note [Injected sanitizer reports] in sanitizer_selftest.cpp).
#pragma once

#include <cstdint>
#include <string>

namespace torch_npu_pinpool {

// Runs the injected defect `kind`; raises if this build lacks the sanitizer it needs. Built and
// bound only with TORCH_NPU_PINPOOL_SANITIZE (setup.py defines PINPOOL_SANITIZERS).
int64_t inject_sanitizer_report(const std::string& kind);

}  // namespace torch_npu_pinpool
