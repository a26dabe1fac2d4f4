// glibc interfaces that Swift's Glibc module leaves out: timerfd (EventLoops' PreciseTimer), mallopt (the relay
// limits malloc's per-thread arenas), naming the calling thread or making the process undumpable (prctl is
// variadic, so Swift cannot call it directly), and copying another process's descriptor (syscall is too).
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

#include <sys/syscall.h>
#include <unistd.h>

/// A copy (close-on-exec) of process `pid`'s descriptor `fd`, through pidfd_open and pidfd_getfd (Linux 5.6; the
/// caller needs ptrace access to the process: root, or its parent); -1 with errno set otherwise. The doc test's
/// stand-in for systemd hands a held listening socket to each new service process this way (syscall is variadic,
/// so Swift cannot call it directly).
static inline int csystem_copy_descriptor(int pid, int fd) {
    int process = (int)syscall(SYS_pidfd_open, pid, 0);
    if (process < 0) return -1;
    int copy = (int)syscall(SYS_pidfd_getfd, process, fd, 0);
    close(process);
    return copy;
}
