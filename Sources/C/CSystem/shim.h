// glibc interfaces that Swift's Glibc module leaves out: epoll(7) and timerfd (the load
// generator), eventfd (HTTP2Client's wake-ups), mallopt (the relay limits malloc's per-thread arenas).
#include <malloc.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
