// A test shim, loaded with LD_PRELOAD: fsync fails with EIO for the paths the environment
// names, so that the e2e tests reach hpctrain's fsync failure paths (where NFS and Lustre
// first report a full disk or quota, or a failing server). HT_FAIL_FSYNC_DIR=DIR fails each
// fsync of the directory DIR (an absolute path); HT_FAIL_FSYNC_FILE=TEXT fails each fsync
// of a regular file whose absolute path contains TEXT. HT_STALL_FSYNC_FILE=TEXT: such an
// fsync never returns (a process killed there is killed in the middle of that write).
// HT_SLOW_FSYNC_FILE=TEXT: such an fsync takes 2 s more (a slow parallel file system).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int names(int fd, const char* dir, const char* file) {
  if (!dir && !file) return 0;
  char link[64];
  char path[PATH_MAX];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, path, sizeof path - 1);
  struct stat st;
  if (n <= 0 || fstat(fd, &st) != 0) return 0;
  path[n] = '\0';
  if (dir && S_ISDIR(st.st_mode) && strcmp(path, dir) == 0) return 1;
  return file && S_ISREG(st.st_mode) && strstr(path, file) != NULL;
}

int fsync(int fd) {
  static int (*real)(int);
  if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
  if (names(fd, NULL, getenv("HT_STALL_FSYNC_FILE"))) {
    for (;;) pause();
  }
  if (names(fd, NULL, getenv("HT_SLOW_FSYNC_FILE"))) sleep(2);
  if (names(fd, getenv("HT_FAIL_FSYNC_DIR"), getenv("HT_FAIL_FSYNC_FILE"))) {
    errno = EIO;
    return -1;
  }
  return real(fd);
}
