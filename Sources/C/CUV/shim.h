#ifndef CUV_SHIM_H
#define CUV_SHIM_H
/* libuv 1.44 (Debian's libuv1-dev), for the EventLoops module. Every handle type begins with the fields of
 * uv_handle_t (and a TCP handle with those of uv_stream_t): C code converts between them with a cast,
 * which Swift cannot write between unrelated imported structs. These casts are all this shim adds. */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <uv.h>

static inline uv_handle_t *CUV_handle(void *handle) { return (uv_handle_t *)handle; }
static inline uv_stream_t *CUV_stream(uv_tcp_t *tcp) { return (uv_stream_t *)tcp; }
static inline uv_tcp_t *CUV_tcp(uv_stream_t *stream) { return (uv_tcp_t *)stream; }

#endif
