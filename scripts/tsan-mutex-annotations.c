// Makes Synchronization.Mutex visible to ThreadSanitizer on Linux; loaded with LD_PRELOAD by
// `scripts/sanitize thread` only. Not part of duo-relay.
//
// Why: Mutex's fast paths (one compare-and-exchange to lock, one to unlock) are inlined into
// our code, which is compiled with -sanitize=thread, so TSan sees them. Its slow paths are not:
// when the lock is contended, `_MutexHandle._lockSlow` takes it by spinning with plain atomic
// instructions or by a FUTEX_LOCK_PI system call, and `_unlockSlow` hands it over with
// FUTEX_UNLOCK_PI, all inside libswiftSynchronization.so, which is not instrumented. TSan then
// misses the hand-over and reports every contended `withLock` as a race between two threads
// that both held the lock (Swift 6.3.1: a four-thread counter under a Mutex is enough).
//
// How: these definitions interpose the two slow paths (our modules call them through the PLT),
// run the real ones, and tell TSan what happened: a release of the lock's address before
// unlocking, an acquire after locking. The fast paths already synchronize on that same address,
// so TSan ends up with exactly the happens-before edges the lock creates, and no others: a real
// race next to a Mutex is still reported. `_tryLockSlow` is not interposed: nothing here uses
// `withLockIfAvailable`.
//
// The symbols are the toolchain's (Swift calling convention: the handle's address comes as the
// self argument). scripts/sanitize checks that libswiftSynchronization.so still exports them.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

// Weak: a process without the TSan runtime (curl, openssl, nginx started by tests) inherits
// LD_PRELOAD too; there the annotations are absent and the functions only forward.
__attribute__((weak)) void __tsan_acquire(void *address);
__attribute__((weak)) void __tsan_release(void *address);

#define LOCK_SLOW "$s15Synchronization12_MutexHandleV9_lockSlowyys6UInt32VF"
#define UNLOCK_SLOW "$s15Synchronization12_MutexHandleV11_unlockSlowyyF"

typedef __attribute__((swiftcall)) void (*LockSlow)(uint32_t, __attribute__((swift_context)) void *);
typedef __attribute__((swiftcall)) void (*UnlockSlow)(__attribute__((swift_context)) void *);

static void *next_definition(const char *name) {
    void *function = dlsym(RTLD_NEXT, name);
    if (function == NULL) abort();  // only reached from Swift code, so the library is loaded
    return function;
}

__attribute__((swiftcall)) void duo_lock_slow(uint32_t thread_id, __attribute__((swift_context)) void *handle)
    __asm__(LOCK_SLOW);
__attribute__((swiftcall)) void duo_lock_slow(uint32_t thread_id, __attribute__((swift_context)) void *handle) {
    static LockSlow real;
    LockSlow function = __atomic_load_n(&real, __ATOMIC_ACQUIRE);
    if (function == NULL) {
        function = (LockSlow)next_definition(LOCK_SLOW);
        __atomic_store_n(&real, function, __ATOMIC_RELEASE);
    }
    function(thread_id, handle);
    if (__tsan_acquire) __tsan_acquire(handle);
}

__attribute__((swiftcall)) void duo_unlock_slow(__attribute__((swift_context)) void *handle) __asm__(UNLOCK_SLOW);
__attribute__((swiftcall)) void duo_unlock_slow(__attribute__((swift_context)) void *handle) {
    static UnlockSlow real;
    UnlockSlow function = __atomic_load_n(&real, __ATOMIC_ACQUIRE);
    if (function == NULL) {
        function = (UnlockSlow)next_definition(UNLOCK_SLOW);
        __atomic_store_n(&real, function, __ATOMIC_RELEASE);
    }
    if (__tsan_release) __tsan_release(handle);
    function(handle);
}
