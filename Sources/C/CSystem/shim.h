// glibc interfaces that Swift's Glibc module leaves out: timerfd (Loop's PreciseTimer), mallopt (the relay
// limits malloc's per-thread arenas), and naming the calling thread or making the process undumpable (prctl is
// variadic, so Swift cannot call it directly).
#include <malloc.h>
#include <sys/prctl.h>
#include <sys/timerfd.h>

/// Names the calling thread (at most 15 bytes are kept), as `top -H` and /proc show it.
static inline int csystem_set_thread_name(const char *name) {
    return prctl(PR_SET_NAME, (unsigned long)name, 0UL, 0UL, 0UL);
}

/// Makes the process undumpable: no core file, and no ptrace attach or reading of /proc/<pid>/mem,
/// environ or maps by other processes of the same user (only CAP_SYS_PTRACE still can).
static inline int csystem_forbid_dumping(void) {
    return prctl(PR_SET_DUMPABLE, 0UL, 0UL, 0UL, 0UL);
}

/// Whether the process is dumpable (1) or not (0); -1 on error.
static inline int csystem_dumpable(void) {
    return prctl(PR_GET_DUMPABLE, 0UL, 0UL, 0UL, 0UL);
}

// setns(2) is declared by <sched.h> only under _GNU_SOURCE, which this module does not set.
extern int setns(int fd, int nstype);

/// Moves the calling thread into the network namespace open at `fd` (tests put a server there).
static inline int csystem_enter_network_namespace(int fd) {
    return setns(fd, 0x40000000 /* CLONE_NEWNET */);
}
