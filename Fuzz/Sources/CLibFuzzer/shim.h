// libFuzzer's driver entry point, from the toolchain's libclang_rt.fuzzer (linked by
// -sanitize=fuzzer). Declared here because no header ships with it.
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));
