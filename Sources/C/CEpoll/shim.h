// epoll(7) and timerfd, which Swift's Glibc module does not include (used by the load generator).
#include <sys/epoll.h>
#include <sys/timerfd.h>
