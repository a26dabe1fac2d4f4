#ifndef CPKCS11_SHIM_H
#define CPKCS11_SHIM_H
/* The PKCS#11 (Cryptoki 2.40) types, constants and function list, from p11-kit's header (Debian's
 * libp11-kit-dev). Nothing is linked: the operator's module (softhsm2, tpm2-pkcs11, a vendor's HSM library) is
 * loaded at run time with dlopen from apns.pkcs11_module, and every call goes through the function list its
 * C_GetFunctionList returns. p11-kit's header defines CK_PTR, CK_DEFINE_FUNCTION, CK_DECLARE_FUNCTION,
 * CK_DECLARE_FUNCTION_POINTER, CK_CALLBACK_FUNCTION and NULL_PTR itself (its own comment says no definitions are
 * needed from the includer), with the standard's names (CRYPTOKI_COMPAT, its default). */
#include <stddef.h>
#include <p11-kit-1/p11-kit/pkcs11.h>
#endif
