// Passing file descriptors over a Unix domain socket (SCM_RIGHTS). The CMSG_* macros that build and
// read the control message are C macros Swift cannot call, so the two calls live here.
#include "descriptor_passing.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include <fcntl.h>
#include <stdio.h>
#if defined(__GLIBC__) || defined(__linux__)
#include <stdio_ext.h>
#endif

#define VAULTSYNC_MAX_DESCRIPTORS 8

ssize_t vaultsync_send_descriptors(int socket, const void *bytes, size_t length, const int *descriptors, int count) {
    if (count < 0 || count > VAULTSYNC_MAX_DESCRIPTORS || length == 0) {
        errno = EINVAL;
        return -1;
    }
    union {
        char buffer[CMSG_SPACE(sizeof(int) * VAULTSYNC_MAX_DESCRIPTORS)];
        struct cmsghdr align;
    } control;
    memset(&control, 0, sizeof(control));
    struct iovec vector = { .iov_base = (void *)bytes, .iov_len = length };
    struct msghdr message;
    memset(&message, 0, sizeof(message));
    message.msg_iov = &vector;
    message.msg_iovlen = 1;
    if (count > 0) {
        message.msg_control = control.buffer;
        message.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)count);
        struct cmsghdr *header = CMSG_FIRSTHDR(&message);
        header->cmsg_level = SOL_SOCKET;
        header->cmsg_type = SCM_RIGHTS;
        header->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)count);
        memcpy(CMSG_DATA(header), descriptors, sizeof(int) * (size_t)count);
    }
    int flags = 0;
#ifdef MSG_NOSIGNAL
    flags |= MSG_NOSIGNAL;
#endif
    ssize_t sent;
    do {
        sent = sendmsg(socket, &message, flags);
    } while (sent < 0 && errno == EINTR);
    return sent;
}

ssize_t vaultsync_receive_descriptors(int socket, void *bytes, size_t length, int *descriptors, int capacity, int *count) {
    *count = 0;
    union {
        char buffer[CMSG_SPACE(sizeof(int) * VAULTSYNC_MAX_DESCRIPTORS)];
        struct cmsghdr align;
    } control;
    struct iovec vector = { .iov_base = bytes, .iov_len = length };
    struct msghdr message;
    memset(&message, 0, sizeof(message));
    message.msg_iov = &vector;
    message.msg_iovlen = 1;
    message.msg_control = control.buffer;
    message.msg_controllen = sizeof(control.buffer);
    int flags = 0;
#ifdef MSG_CMSG_CLOEXEC
    flags |= MSG_CMSG_CLOEXEC;
#endif
    ssize_t received = recvmsg(socket, &message, flags);
    if (received < 0) return received;
    for (struct cmsghdr *header = CMSG_FIRSTHDR(&message); header != NULL; header = CMSG_NXTHDR(&message, header)) {
        if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
        size_t n = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        const unsigned char *data = CMSG_DATA(header);
        for (size_t i = 0; i < n; i++) {
            int fd;
            memcpy(&fd, data + i * sizeof(int), sizeof(int));
#ifndef MSG_CMSG_CLOEXEC
            fcntl(fd, F_SETFD, FD_CLOEXEC);
#endif
            if (*count < capacity) {
                descriptors[(*count)++] = fd;
            } else {
                close(fd);
            }
        }
    }
    return received;
}

void vaultsync_discard_buffered_input(void) {
#if defined(__APPLE__)
    fpurge(stdin);
#else
    __fpurge(stdin);
#endif
    clearerr(stdin);
}

void vaultsync_flush_output(void) {
    fflush(stdout);
    fflush(stderr);
}

void vaultsync_clear_output_errors(void) {
    clearerr(stdout);
    clearerr(stderr);
}
