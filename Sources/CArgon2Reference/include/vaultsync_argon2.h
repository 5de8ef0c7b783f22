/* Argon2id (version 0x13) from the vendored reference implementation; see argon2_reference.c. */
#ifndef VAULTSYNC_ARGON2_H
#define VAULTSYNC_ARGON2_H

#include <stddef.h>
#include <stdint.h>

/* Derives `out_length` bytes with Argon2id into `out`. `secret` and `associated_data` may be NULL
 * with length 0. `memory_kib` is in kibibytes; `parallelism` lanes run on as many threads.
 * Returns 0 on success, otherwise an Argon2 error code (see vaultsync_argon2_message). */
int vaultsync_argon2id_raw(const void *password, size_t password_length,
                           const void *salt, size_t salt_length,
                           const void *secret, size_t secret_length,
                           const void *associated_data, size_t associated_data_length,
                           uint32_t iterations, uint32_t memory_kib, uint32_t parallelism,
                           void *out, size_t out_length);

/* A static English description of an Argon2 status code. */
const char *vaultsync_argon2_message(int status);

#endif
