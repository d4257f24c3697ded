/*
 * native-replay: the physical-limit baseline for `rrstore replay`.
 *
 * Replays one LLVM 18-22 ("kernel-named") host recording straight from its
 * raw files with nothing in between: mmap the arena at BumpAllocVAStart
 * (MAP_FIXED_NOREPLACE), read() <Name>.memory into it, dlopen <Name>.image,
 * restore <Name>.globals through dlsym, call the kernel with every argument
 * as a 64-bit integer, then compare the arena with <Name>.original.output,
 * read 1 MiB at a time. No child process, no verification report, no hashing,
 * no history: everything rrstore adds on top is what the benchmark measures.
 * If the arena range is taken by its own mappings (ASLR, rare), it re-executes
 * itself in a fresh layout, up to 3 times, as rrstore's runner does.
 *
 * usage: native-replay KERNEL.json      exit 0 verified, 1 mismatch, 2 error
 * build: cc -O2 -o native-replay native_replay.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_ARGS 32

static void die(const char *what, const char *detail) {
  fprintf(stderr, "native-replay: %s: %s\n", what, detail);
  exit(2);
}

static char *slurp(const char *path, size_t *len, int must) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) {
    if (must) die(path, strerror(errno));
    *len = 0;
    return NULL;
  }
  struct stat st;
  fstat(fd, &st);
  char *buf = malloc(st.st_size + 1);
  size_t got = 0;
  while (got < (size_t)st.st_size) {
    ssize_t n = read(fd, buf + got, st.st_size - got);
    if (n <= 0) die(path, "short read");
    got += n;
  }
  buf[got] = 0;
  close(fd);
  *len = got;
  return buf;
}

static const char *key(const char *json, const char *k) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", k);
  const char *p = strstr(json, pat);
  if (!p) die("missing key", k);
  return p + strlen(pat);
}

/* read the whole file at path into dst (exactly len bytes) */
static void read_into(const char *path, char *dst, size_t len) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) die(path, strerror(errno));
  size_t got = 0;
  while (got < len) {
    ssize_t n = read(fd, dst + got, len - got);
    if (n <= 0) die(path, "shorter than DeviceMemorySize");
    got += n;
  }
  close(fd);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s KERNEL.json\n", argv[0]);
    return 2;
  }
  size_t jlen;
  char *json = slurp(argv[1], &jlen, 1);
  char base[4096];
  snprintf(base, sizeof base, "%.*s", (int)(strlen(argv[1]) - 5), argv[1]);
  const char *np = key(json, "Name") + 1;
  char name[1024];
  snprintf(name, sizeof name, "%.*s", (int)(strchr(np, '"') - np), np);
  uint64_t start = strtoull(key(json, "BumpAllocVAStart"), NULL, 10);
  size_t size = strtoull(key(json, "DeviceMemorySize"), NULL, 10);
  uint64_t args[MAX_ARGS] = {0};
  int nargs = 0;
  for (const char *p = key(json, "ArgPtrs") + 1; *p != ']' && nargs < MAX_ARGS;) {
    char *e;
    args[nargs++] = (uint64_t)strtoll(p, &e, 10);
    p = (*e == ',') ? e + 1 : e;
  }
  char path[4200];

  /* 1. arena at the recorded address, input read straight into it */
  uintptr_t pg = sysconf(_SC_PAGESIZE), lo = start & ~(pg - 1), hi = (start + size + pg - 1) & ~(pg - 1);
  void *m = mmap((void *)lo, hi - lo, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  if (m == MAP_FAILED && errno == EEXIST) {
    /* Something of this process (ASLR) sits in the range: re-execute, in a
     * fresh random layout, up to 3 times (rrstore retries the same way). */
    const char *t = getenv("NATIVE_REPLAY_TRY");
    int tries = t ? atoi(t) : 0;
    if (tries < 3) {
      char n[16];
      snprintf(n, sizeof n, "%d", tries + 1);
      setenv("NATIVE_REPLAY_TRY", n, 1);
      execv("/proc/self/exe", argv);
    }
  }
  if (m != (void *)lo) die("mmap arena", strerror(errno));
  snprintf(path, sizeof path, "%s.memory", base);
  read_into(path, (char *)start, size);

  /* 2. image */
  snprintf(path, sizeof path, "%s.image", base);
  char abs[4096];
  if (!realpath(path, abs)) die(path, strerror(errno));
  void *h = dlopen(abs, RTLD_NOW | RTLD_LOCAL);
  if (!h) die("dlopen", dlerror());
  void *fn = dlsym(h, name);
  if (!fn) die("dlsym", name);

  /* 3. globals: [name\0][u32 size][bytes]... */
  size_t glen;
  snprintf(path, sizeof path, "%s.globals", base);
  char *g = slurp(path, &glen, 0);
  for (size_t i = 0; i < glen;) {
    const char *gname = g + i;
    i += strlen(gname) + 1;
    uint32_t gs;
    memcpy(&gs, g + i, 4);
    i += 4;
    void *gp = dlsym(h, gname);
    if (!gp) die("global not exported", gname);
    memcpy(gp, g + i, gs);
    i += gs;
  }

  /* 4. call: up to MAX_ARGS integer arguments (extra ones are ignored by the callee) */
  typedef void (*K)(uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t,
                    uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t,
                    uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t,
                    uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  ((K)fn)(args[0], args[1], args[2], args[3], args[4], args[5], args[6], args[7], args[8], args[9],
          args[10], args[11], args[12], args[13], args[14], args[15], args[16], args[17], args[18],
          args[19], args[20], args[21], args[22], args[23], args[24], args[25], args[26], args[27],
          args[28], args[29], args[30], args[31]);
  clock_gettime(CLOCK_MONOTONIC, &t1);

  /* 5. compare with the recorded output, 1 MiB at a time */
  snprintf(path, sizeof path, "%s.original.output", base);
  int fd = open(path, O_RDONLY);
  if (fd < 0) die(path, strerror(errno));
  enum { PIECE = 1 << 20 };
  char *buf = malloc(PIECE);
  size_t off = 0;
  int same = 1;
  while (off < size) {
    size_t n = size - off < PIECE ? size - off : PIECE;
    size_t got = 0;
    while (got < n) {
      ssize_t r = read(fd, buf + got, n - got);
      if (r <= 0) die(path, "short read");
      got += r;
    }
    if (memcmp(buf, (char *)start + off, n) != 0) same = 0;
    off += n;
  }
  printf("%s: %d args, arena %zu bytes at %#lx, kernel %.3f ms, %s\n", name, nargs, size,
         (unsigned long)start,
         (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6,
         same ? "VERIFIED" : "MISMATCH");
  return same ? 0 : 1;
}
