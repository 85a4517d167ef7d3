// HT_HOST_DEVICE marks functions the CUDA kernels share with the host.
#pragma once

#if defined(__CUDACC__)
#define HT_HOST_DEVICE __host__ __device__
#else
#define HT_HOST_DEVICE
#endif
