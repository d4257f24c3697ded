// Real LLVM OpenMP offload kernels for the GPU check (scripts/gpu-check.sh
// records them with LIBOMPTARGET_RECORD=1 where clang can build OpenMP
// offload code for the GPU, then replays each with --verify):
//   an SPMD kernel, a generic-mode kernel, a reduction, a kernel that
//   calls omp_get_num_devices() and omp_get_device_num() (it reads the
//   device environment the plugin writes at load time), and a kernel that
//   reaches its data only through device pointers stored in device memory:
//   a mapped struct with a pointer member (attach) and a declare-target
//   pointer variable.
// Build: clang -fopenmp --offload-arch=sm_XX -O2 -o omp_kernels omp_kernels.c
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#define N (1 << 20)

struct vec {
    float *data;
    int n;
};

#pragma omp declare target
float *dt_lut;
#pragma omp end declare target

int main(void) {
    float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float));
    for (int i = 0; i < N; i++) {
        x[i] = (float)(i % 1000) * 0.5f;
        y[i] = (float)(i % 37);
    }
    const float a = 1.25f;

    // SPMD: a combined construct.
#pragma omp target teams distribute parallel for map(to : x[0 : N]) map(tofrom : y[0 : N])
    for (int i = 0; i < N; i++) y[i] = a * x[i] + y[i];

    // Generic mode: a sequential part in each team before the parallel loop.
    int rows = 256, cols = N / 256;
#pragma omp target teams distribute map(tofrom : y[0 : N])
    for (int r = 0; r < rows; r++) {
        float scale = (float)(r % 7) + 1.0f;
#pragma omp parallel for
        for (int c = 0; c < cols; c++) y[r * cols + c] *= scale;
    }

    // A reduction across teams.
    double sum = 0.0;
#pragma omp target teams distribute parallel for reduction(+ : sum) map(to : y[0 : N])
    for (int i = 0; i < N; i++) sum += y[i];

    // The device environment: what the plugin wrote at load time.
    int devices = -1, device = -1;
#pragma omp target map(from : devices, device)
    {
        devices = omp_get_num_devices();
        device = omp_get_device_num();
    }

    // Pointers in device memory: the struct's device copy holds y's device
    // address (attached), the declare-target global holds lut's.
    float lut[64];
    for (int i = 0; i < 64; i++) lut[i] = (float)(i * 3 + 1);
    dt_lut = lut;
    struct vec v = {y, N};
#pragma omp target enter data map(to : dt_lut[0 : 64])
#pragma omp target teams distribute parallel for map(to : v) map(tofrom : v.data[0 : N])
    for (int i = 0; i < v.n; i++) v.data[i] += dt_lut[i & 63];
#pragma omp target exit data map(delete : dt_lut[0 : 64])

    printf("sum=%.3f y[12345]=%.3f devices=%d device=%d\n", sum, y[12345], devices, device);
    free(x);
    free(y);
    return 0;
}
