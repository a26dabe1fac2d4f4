// Initializes OpenSSL without its exit-time cleanup in every process of a scripts/sanitize run,
// before anything else in the process uses OpenSSL; loaded with LD_PRELOAD. Not part of duo-relay
// (the relay does the same first thing in main: see Sources/Crypto/RelayCrypto/OpenSSLLibrary.swift).
//
// Why: OpenSSL frees its global state in an atexit handler, which runs before LeakSanitizer's
// check. A thread that ends between the two (an idle dispatch worker that once drew random
// bytes, for example) can no longer free its per-thread random generators, and LeakSanitizer
// reports them (40 bytes direct, about 2 KiB indirect, stack cut at CRYPTO_zalloc
// since libcrypto has no frame pointers, so no suppression could name it precisely). Without the
// atexit cleanup, such a thread frees its generators itself, and OpenSSL's global state stays
// reachable, so a real leak of an OpenSSL object is still reported.
#include <openssl/crypto.h>

__attribute__((constructor)) static void initialize_openssl_without_exit_cleanup(void) {
    OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, NULL);
}
