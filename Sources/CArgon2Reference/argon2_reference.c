/* Argon2id for every platform, without a system library.
 *
 * The Argon2 reference implementation (github.com/P-H-C/phc-winner-argon2, commit f57e61e, by its
 * authors; CC0 1.0 or Apache 2.0, see phc-winner-argon2/LICENSE) is vendored unchanged under
 * phc-winner-argon2/ and compiled here as one translation unit, portable C ("ref", no SIMD), with
 * every external symbol renamed (symbol_names.h). Only the entry point in
 * include/vaultsync_argon2.h is meant to be called. Checked against RFC 9106's Argon2id vector
 * and the protocol's KDF vectors (Tests/VaultCryptoTests/Argon2Tests.swift). */
/* The system headers the sources use come first, so the renaming below cannot touch a declaration of
 * theirs. _DEFAULT_SOURCE is what core.c sets for explicit_bzero on glibc. */
#define _DEFAULT_SOURCE
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
/* glibc's features.h has turned it into "1"; core.c defines it again, empty. */
#undef _DEFAULT_SOURCE

#include "symbol_names.h"

/* core.c first: it defines _DEFAULT_SOURCE before any system header is read. blake2b.c before
 * ref.c: both define a macro G, and blake2b.c undefines its own. */
#include "phc-winner-argon2/src/core.c"
#include "phc-winner-argon2/src/blake2/blake2b.c"
#include "phc-winner-argon2/src/argon2.c"
#include "phc-winner-argon2/src/encoding.c"
#include "phc-winner-argon2/src/ref.c"
#include "phc-winner-argon2/src/thread.c"

#include "include/vaultsync_argon2.h"

int vaultsync_argon2id_raw(const void *password, size_t password_length,
                           const void *salt, size_t salt_length,
                           const void *secret, size_t secret_length,
                           const void *associated_data, size_t associated_data_length,
                           uint32_t iterations, uint32_t memory_kib, uint32_t parallelism,
                           void *out, size_t out_length) {
    argon2_context context = {0};
    context.out = (uint8_t *)out;
    context.outlen = (uint32_t)out_length;
    context.pwd = (uint8_t *)password;
    context.pwdlen = (uint32_t)password_length;
    context.salt = (uint8_t *)salt;
    context.saltlen = (uint32_t)salt_length;
    context.secret = (uint8_t *)secret;
    context.secretlen = (uint32_t)secret_length;
    context.ad = (uint8_t *)associated_data;
    context.adlen = (uint32_t)associated_data_length;
    context.t_cost = iterations;
    context.m_cost = memory_kib;
    context.lanes = parallelism;
    context.threads = parallelism;
    context.version = ARGON2_VERSION_13;
    context.flags = ARGON2_DEFAULT_FLAGS;
    if (out_length > UINT32_MAX || password_length > UINT32_MAX || salt_length > UINT32_MAX
        || secret_length > UINT32_MAX || associated_data_length > UINT32_MAX) {
        return ARGON2_MEMORY_TOO_MUCH;
    }
    return argon2_ctx(&context, Argon2_id);
}

const char *vaultsync_argon2_message(int status) {
    return argon2_error_message(status);
}
