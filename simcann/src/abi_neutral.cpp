// Entry points whose prototype changed between the wheels' ACL headers. Compiled WITHOUT the ACL
// headers, with the newest signature; the older one (fewer trailing arguments) calls it safely on
// the x86-64 / aarch64 C ABI, the extra argument being ignored.
#include <cstdint>

namespace simcann {
int debug_json(void* modelRI, const char* path);
void log(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
}  // namespace simcann

// 2.8 / 2.9 headers: (aclmdlRI modelRI, const char* path); 2.10+: (..., uint32_t flags).
extern "C" __attribute__((visibility("default"))) int aclmdlRIDebugJsonPrint(void* modelRI,
                                                                             const char* path,
                                                                             uint32_t) {
  simcann::log("%s", __func__);
  return simcann::debug_json(modelRI, path);
}
