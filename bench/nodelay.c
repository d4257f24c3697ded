/* LD_PRELOAD shim for bench/remote.sh NODELAY=1: sets TCP_NODELAY on every
 * socket the server accepts, as production S3 servers do (AWS, MinIO and
 * Ceph RGW send small responses without waiting). s3s-fs 0.14 does not:
 * each GET on a kept-alive connection then waits for the client's delayed
 * ACK, ~40 ms (BENCHMARKS.md, session 14). Built by bench/remote.sh. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
static void nodelay(int fd) { int one = 1; if (fd >= 0) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); }
int accept4(int s, struct sockaddr *a, socklen_t *l, int f) {
  static int (*real)(int, struct sockaddr *, socklen_t *, int);
  if (!real) real = dlsym(RTLD_NEXT, "accept4");
  int fd = real(s, a, l, f); nodelay(fd); return fd;
}
int accept(int s, struct sockaddr *a, socklen_t *l) {
  static int (*real)(int, struct sockaddr *, socklen_t *);
  if (!real) real = dlsym(RTLD_NEXT, "accept");
  int fd = real(s, a, l); nodelay(fd); return fd;
}
