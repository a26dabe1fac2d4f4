#ifndef DUO_RELAY_CJEMALLOC_SHIM_H
#define DUO_RELAY_CJEMALLOC_SHIM_H

#include <stddef.h>

// Linking libjemalloc makes it the process's malloc (Debian builds it without a symbol prefix).
// Only its control interface is declared here: <jemalloc/jemalloc.h> redeclares malloc and friends,
// which would clash with glibc's declarations in the Glibc module.
int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen);

#endif
