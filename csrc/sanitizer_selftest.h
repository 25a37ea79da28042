// Sanitized builds: what this build is instrumented with, and the defects injected on purpose
// (Note [Injected sanitizer reports] in sanitizer_selftest.cpp).
#pragma once

#include <cstdint>
#include <string>

namespace torch_npu_pinpool {

// The sanitizers this extension was built with ("address,undefined", "thread"), "" if none.
const char* sanitizers();

// Runs the injected defect `kind` (sanitized builds only; raises otherwise).
int64_t inject_sanitizer_report(const std::string& kind);

}  // namespace torch_npu_pinpool
