#ifndef VAULTSYNC_DESCRIPTOR_PASSING_H
#define VAULTSYNC_DESCRIPTOR_PASSING_H

#include <stddef.h>
#include <sys/types.h>

/// Sends `length` bytes of `bytes` on the connected Unix socket `socket`, with `count` file descriptors
/// (at most 8) attached as SCM_RIGHTS. Returns the bytes sent, or -1 with errno set.
ssize_t vaultsync_send_descriptors(int socket, const void *bytes, size_t length, const int *descriptors, int count);

/// Receives up to `length` bytes into `bytes` from `socket`; descriptors that came with them (at most
/// `capacity`, close-on-exec) are stored in `descriptors` and their number in `*count`. Descriptors
/// beyond `capacity` are closed. Returns the bytes received (0 at the end), or -1 with errno set.
ssize_t vaultsync_receive_descriptors(int socket, void *bytes, size_t length, int *descriptors, int capacity, int *count);

/// Drops what the C library has read ahead from standard input (the agent gives each command a new
/// standard input: nothing one command's input left buffered may reach the next).
void vaultsync_discard_buffered_input(void);

/// fflush of standard output and error.
void vaultsync_flush_output(void);

/// clearerr of standard output and error.
void vaultsync_clear_output_errors(void);

#endif
