/* bench/first-touch/first_touch.c: what a fresh arena's first touch costs,
 * depending on whether the previous runner's arena was freed first
 * (issue 24). Load-independent: it reports CPU time, not wall time.
 *
 *   cc -O2 -o /tmp/first_touch bench/first-touch/first_touch.c
 *   /tmp/first_touch [N]
 *
 * Each of N rounds forks a "runner" that maps 64 MiB, advises huge pages
 * (MADV_HUGEPAGE, as the host runner does) and writes every byte, timing
 * that on its own CPU clock; the parent then kills it the way rrstore
 * kills a finished runner (SCHED_IDLE, SIGKILL), and either
 *   idle:     goes on at once (the teardown runs when a CPU is idle: the
 *             behaviour before issue 24),
 *   released: frees its memory first (process_mrelease, like the runner
 *             unmapping its arena on request),
 *   waited:   waits for it to end.
 * The three ways are interleaved round by round; it prints per way the N
 * CPU times of the first touch, median and max. */
#define _GNU_SOURCE
#include <signal.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SZ (64ul << 20)

static double cpu_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static double touch_in_child(int way) {
  int p[2];
  if (pipe(p)) exit(1);
  pid_t pid = fork();
  if (pid == 0) {
    char *a = mmap(NULL, SZ, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    madvise(a, SZ, MADV_HUGEPAGE);
    double t0 = cpu_ms();
    memset(a, 1, SZ);
    double ms = cpu_ms() - t0;
    if (write(p[1], &ms, sizeof ms) != sizeof ms) _exit(1);
    pause();
    _exit(0);
  }
  double ms = 0;
  if (read(p[0], &ms, sizeof ms) != sizeof ms) exit(1);
  close(p[0]);
  close(p[1]);
  struct sched_param sp = {0};
  sched_setscheduler(pid, SCHED_IDLE, &sp);
  int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
  kill(pid, SIGKILL);
  if (way == 1 && syscall(SYS_process_mrelease, pfd, 0) != 0) perror("process_mrelease");
  if (way == 2) waitpid(pid, NULL, 0);
  close(pfd);
  return ms;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 10;
  const char *names[3] = {"idle", "released", "waited"};
  double *v[3];
  for (int w = 0; w < 3; w++) v[w] = calloc(n, sizeof(double));
  for (int i = 0; i < n; i++)
    for (int w = 0; w < 3; w++) {
      /* two rounds of the same way in a row: the second one's touch
       * follows the first one's kill */
      touch_in_child(w);
      v[w][i] = touch_in_child(w);
      while (waitpid(-1, NULL, WNOHANG) > 0) {}
    }
  while (wait(NULL) > 0) {}
  for (int w = 0; w < 3; w++) {
    printf("%-9s first touch of 64 MiB, CPU ms:", names[w]);
    for (int i = 0; i < n; i++) printf(" %.1f", v[w][i]);
    qsort(v[w], n, sizeof(double), cmp);
    printf("  median %.1f max %.1f\n", v[w][n / 2], v[w][n - 1]);
  }
  return 0;
}
