/* What an aarch64 guest under qemu-user sees in /proc/cpuinfo (ci/lib/aarch64.sh builds it
 * statically with the cross compiler and runs it through the qemu-aarch64 binfmt handler).
 * Prints "aarch64" when the file is the one qemu emulates for an ARM guest (qemu >= 10: it has
 * "CPU implementer" lines), "host" when qemu passed the x86 host's file through (qemu 7.2, on
 * which PyPI's aarch64 torch >= 2.11 faults: Note [qemu-user from bookworm-backports]). */
#include <stdio.h>
#include <string.h>

int main(void) {
  char line[512];
  FILE* f = fopen("/proc/cpuinfo", "r");
  if (f == NULL) {
    perror("/proc/cpuinfo");
    return 2;
  }
  while (fgets(line, sizeof line, f) != NULL) {
    if (strncmp(line, "CPU implementer", strlen("CPU implementer")) == 0) {
      puts("aarch64");
      return 0;
    }
  }
  puts("host");
  return 0;
}
