// A PKCS#11 module that is another one whose every C_Sign takes SLOW_PKCS11_DELAY_MS milliseconds more: the
// benchmark's slow token (BENCHMARKS.md, "The provider token's refresh"), SoftHSM answering as slowly as a network
// HSM or a cloud KMS does. Not part of duo-relay; `duo-relay-load bench` builds it with cc into its run's directory
// and gives it to the relay as apns.pkcs11_module.
//
// SLOW_PKCS11_MODULE names the module it forwards to (SoftHSM's). Every function is that module's, from its own
// function list, but C_Sign, which sleeps first and then calls the module's.
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <time.h>
#include <p11-kit-1/p11-kit/pkcs11.h>

static CK_FUNCTION_LIST slow_list;
static CK_C_Sign module_sign;
static long delay_ms;

static CK_RV slow_sign(CK_SESSION_HANDLE session, CK_BYTE_PTR data, CK_ULONG data_len, CK_BYTE_PTR signature,
                       CK_ULONG_PTR signature_len) {
    // A call that only asks for the signature's length answers at once, as a network HSM's client does.
    if (signature != NULL && delay_ms > 0) {
        struct timespec wait = {delay_ms / 1000, (delay_ms % 1000) * 1000000L};
        while (nanosleep(&wait, &wait) != 0 && errno == EINTR) {
        }
    }
    return module_sign(session, data, data_len, signature, signature_len);
}

CK_RV C_GetFunctionList(CK_FUNCTION_LIST_PTR_PTR list) {
    if (list == NULL) return CKR_ARGUMENTS_BAD;
    if (module_sign == NULL) {
        const char *path = getenv("SLOW_PKCS11_MODULE");
        const char *delay = getenv("SLOW_PKCS11_DELAY_MS");
        if (path == NULL || delay == NULL) return CKR_GENERAL_ERROR;
        void *module = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (module == NULL) return CKR_GENERAL_ERROR;
        CK_C_GetFunctionList get_function_list = (CK_C_GetFunctionList)dlsym(module, "C_GetFunctionList");
        CK_FUNCTION_LIST_PTR module_list = NULL;
        if (get_function_list == NULL || get_function_list(&module_list) != CKR_OK || module_list == NULL ||
            module_list->C_Sign == NULL)
            return CKR_GENERAL_ERROR;
        delay_ms = strtol(delay, NULL, 10);
        slow_list = *module_list;
        slow_list.C_Sign = slow_sign;
        module_sign = module_list->C_Sign;
    }
    *list = &slow_list;
    return CKR_OK;
}
