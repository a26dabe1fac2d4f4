#ifndef CHIREDIS_SHIM_H
#define CHIREDIS_SHIM_H
/* Only hiredis's RESP reply reader and command formatter are used: the relay does its own socket I/O (plain or
 * OpenSSL TLS, which hiredis 0.14 lacks), so none of hiredis's connection API is called. */
#include <stddef.h>
#include <hiredis/hiredis.h>
#include <hiredis/read.h>
#endif
