// A test shim, loaded with LD_PRELOAD into each rank: counts the heap allocations (malloc,
// calloc, realloc, the aligned ones; operator new comes through malloc) the process's main
// thread makes between consecutive training steps, so that the e2e tests can check that
// nothing in the step allocates (docs/architecture.md). A step ends with the control
// all-reduce (three doubles, MPI_MAX, a persistent request: Communicator::allreduce_doubles),
// which this shim recognises at its MPI_Allreduce_init and counts at each MPI_Start.
// Interval i (1-based) runs from the end of step i to the end of step i + 1.
//
// Allocations made inside the MPI library or its transports (a frame of theirs on the
// stack) are counted apart: they are MPICH's own buffers.
//
// HT_ALLOC_REPORT=PATH: at exit, a process that saw a step writes PATH.PID:
//   steps N
//   interval I allocations K mpi M  (each interval with K > 0; M of them in MPI)
//   stack I                         (the call stack of the first allocation outside MPI
//   <backtrace_symbols_fd lines>     in each interval, for the first kStacks intervals)
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

extern void* __libc_malloc(size_t size);
extern void* __libc_calloc(size_t count, size_t size);
extern void* __libc_realloc(void* p, size_t size);
extern void* __libc_memalign(size_t alignment, size_t size);

enum { kMaxIntervals = 1 << 16, kStacks = 64, kFrames = 24 };

static long steps;                      // control all-reduces started
static unsigned counts[kMaxIntervals];  // allocations per interval
static unsigned in_mpi[kMaxIntervals];  // of them, made inside the MPI library
static void* frames[kStacks][kFrames];  // the first allocation outside MPI, per interval
static int depth[kStacks];
static long stack_interval[kStacks];
static int stacks;
static int control_known;
static int by_isend;
static MPI_Request control;
static __thread int thread_kind __attribute__((tls_model("initial-exec")));  // 1 main, 2 other
static __thread int in_backtrace __attribute__((tls_model("initial-exec")));

// MPICH and the transports under it (UCX, libfabric, hwloc): their allocations are theirs.
static int mpi_library(const char* path) {
  const char* name = strrchr(path, '/');
  name = name ? name + 1 : path;
  static const char* const prefixes[] = {"libmpi", "libucs",    "libucp",  "libuct",
                                         "libucm", "libfabric", "libhwloc"};
  for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; ++i) {
    if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0) return 1;
  }
  return 0;
}

static void count_allocation(void) {
  if (steps == 0 || steps >= kMaxIntervals) return;
  if (thread_kind == 0) thread_kind = syscall(SYS_gettid) == getpid() ? 1 : 2;
  if (thread_kind != 1 || in_backtrace) return;
  ++counts[steps];
  void* here[kFrames];
  in_backtrace = 1;
  const int n = backtrace(here, kFrames);
  int mpi = 0;
  for (int i = 0; i < n && !mpi; ++i) {
    Dl_info info;
    mpi = dladdr(here[i], &info) && info.dli_fname && mpi_library(info.dli_fname);
  }
  in_backtrace = 0;
  if (mpi) {
    ++in_mpi[steps];
  } else if (stacks < kStacks && (stacks == 0 || stack_interval[stacks - 1] != steps)) {
    memcpy(frames[stacks], here, sizeof here);
    depth[stacks] = n;
    stack_interval[stacks++] = steps;
  }
}

void* malloc(size_t size) {
  count_allocation();
  return __libc_malloc(size);
}

void* calloc(size_t count, size_t size) {
  count_allocation();
  return __libc_calloc(count, size);
}

void* realloc(void* p, size_t size) {
  count_allocation();
  return __libc_realloc(p, size);
}

void* memalign(size_t alignment, size_t size) {
  count_allocation();
  return __libc_memalign(alignment, size);
}

void* aligned_alloc(size_t alignment, size_t size) {
  count_allocation();
  return __libc_memalign(alignment, size);
}

int posix_memalign(void** out, size_t alignment, size_t size) {
  count_allocation();
  void* p = __libc_memalign(alignment, size);
  if (!p && size) return 12;  // ENOMEM
  *out = p;
  return 0;
}

int MPI_Allreduce_init(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op,
                       MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  static int (*real)(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Info,
                     MPI_Request*);
  if (!real) *(void**)&real = dlsym(RTLD_NEXT, "MPI_Allreduce_init");
  const int rc = real(send, recv, count, type, op, comm, info, request);
  if (rc == MPI_SUCCESS && count == 3 && type == MPI_DOUBLE && op == MPI_MAX && !control_known) {
    control = *request;
    control_known = 1;
  }
  return rc;
}

// HT_ALLOC_STEP=isend: each MPI_Isend ends a step instead (strategy async, whose worker
// sends its gradients to each server once per step and whose servers send each reply).
int MPI_Isend(const void* data, int count, MPI_Datatype type, int to, int tag, MPI_Comm comm,
              MPI_Request* request) {
  static int (*real)(const void*, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request*);
  if (!real) *(void**)&real = dlsym(RTLD_NEXT, "MPI_Isend");
  if (by_isend) ++steps;
  return real(data, count, type, to, tag, comm, request);
}

int MPI_Start(MPI_Request* request) {
  static int (*real)(MPI_Request*);
  if (!real) *(void**)&real = dlsym(RTLD_NEXT, "MPI_Start");
  if (!by_isend && control_known && *request == control) ++steps;
  return real(request);
}

__attribute__((constructor)) static void start(void) {
  const char* step = getenv("HT_ALLOC_STEP");
  by_isend = step && strcmp(step, "isend") == 0;
  void* warm[2];
  in_backtrace = 1;
  backtrace(warm, 2);  // loads libgcc_s now, not inside a step
  in_backtrace = 0;
}

__attribute__((destructor)) static void report(void) {
  const char* base = getenv("HT_ALLOC_REPORT");
  if (!base || steps == 0) return;
  char path[4096];
  snprintf(path, sizeof path, "%s.%ld", base, (long)getpid());
  const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return;
  dprintf(fd, "steps %ld\n", steps);
  for (long i = 1; i <= steps && i < kMaxIntervals; ++i) {
    if (counts[i]) dprintf(fd, "interval %ld allocations %u mpi %u\n", i, counts[i], in_mpi[i]);
  }
  for (int k = 0; k < stacks; ++k) {
    dprintf(fd, "stack %ld\n", stack_interval[k]);
    backtrace_symbols_fd(frames[k], depth[k], fd);
  }
  close(fd);
}
