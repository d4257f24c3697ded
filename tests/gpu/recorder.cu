// GPU check recorder: records real CUDA kernel launches in LLVM's
// hash-named ("Native", LLVM 23+) record-replay layout, the way LLVM's CUDA
// plugin does with LIBOMPTARGET_RECORD=1:
//   * an arena reserved with the VMM API (cuMemAddressReserve at a fixed
//     address hint, cuMemCreate/cuMemMap/cuMemSetAccess),
//   * buffers bump-allocated from it (the launch environment first),
//   * globals written before the launch and saved in the native encoding,
//   * the arena's used bytes saved before (.record_input) and after
//     (.record_output) the launch, the cubin saved as .image.
// Files are written as rec.{json,record_input,record_output,globals,image};
// scripts/gpu-check.sh renames them to <KernelHash>_<LaunchConfigHash>.
//
// Usage:
//   recorder <kernels.cubin> <outdir> CASE
//     CASE: saxpy smem big (the original three), smem48 (exactly 48 KiB of
//     dynamic + static shared memory), bigglobal (a 2 MiB __device__ global
//     the output depends on), sentinel (argument 0 all ones), sparse (8 MiB
//     used of a 4 GiB reservation at an address the driver chose), ptrstruct
//     (data reached through arena pointers stored in a struct in the arena and
//     in a __device__ pointer global), sizeN[kmg] (an N-byte snapshot:
//     size4k, size1m, size16m, size256m), spin (a
//     kernel that never ends when replayed), wild (a store through a wild
//     pointer when replayed)
//   recorder bandwidth <bytes>        plain pinned cuMemcpyHtoD bandwidth
// Host code only; built with: nvcc -O2 -o recorder recorder.cu -lcuda

#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define CK(call)                                                                 \
    do {                                                                         \
        CUresult rr_err = (call);                                                \
        if (rr_err != CUDA_SUCCESS) {                                            \
            const char* rr_name = nullptr;                                       \
            cuGetErrorName(rr_err, &rr_name);                                    \
            std::fprintf(stderr, "recorder: %s failed: %s (line %d)\n", #call,   \
                         rr_name ? rr_name : "?", __LINE__);                     \
            std::exit(1);                                                        \
        }                                                                        \
    } while (0)

static const uint64_t RR_MAGIC = 0x52525354524543ull;
static const uint64_t ARENA_HINT = 0x7e0000000000ull;

struct LaunchEnv {
    uint64_t magic;
    uint64_t n;
};

static std::vector<char> read_file(const std::string& path) {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) {
        std::fprintf(stderr, "recorder: cannot open %s\n", path.c_str());
        std::exit(1);
    }
    std::fseek(f, 0, SEEK_END);
    long n = std::ftell(f);
    std::fseek(f, 0, SEEK_SET);
    std::vector<char> buf((size_t)n);
    if (n > 0 && std::fread(buf.data(), 1, (size_t)n, f) != (size_t)n) {
        std::fprintf(stderr, "recorder: cannot read %s\n", path.c_str());
        std::exit(1);
    }
    std::fclose(f);
    return buf;
}

static void write_file(const std::string& path, const void* data, size_t n) {
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f || (n > 0 && std::fwrite(data, 1, n, f) != n) || std::fclose(f) != 0) {
        std::fprintf(stderr, "recorder: cannot write %s\n", path.c_str());
        std::exit(1);
    }
}

struct Arena {
    CUdeviceptr base = 0;
    size_t size = 0;
    size_t reserved = 0;
    size_t used = 0;
    CUmemGenericAllocationHandle handle = 0;

    CUdeviceptr alloc(size_t n) {
        size_t off = (used + 255) & ~(size_t)255;
        if (off + n > size) {
            std::fprintf(stderr, "recorder: arena of %zu bytes exhausted\n", size);
            std::exit(1);
        }
        used = off + n;
        return base + off;
    }
};

// `want` bytes mapped at the start of a reservation of `reserve` bytes (0 =
// just `want`) at `hint` (0 = wherever the driver puts it).
static Arena make_arena(CUdevice dev, size_t want, size_t reserve = 0,
                        CUdeviceptr hint = (CUdeviceptr)ARENA_HINT) {
    CUmemAllocationProp prop;
    std::memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = (int)dev;
    size_t gran = 0;
    CK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    Arena a;
    a.size = (want + gran - 1) / gran * gran;
    a.reserved = reserve > a.size ? (reserve + gran - 1) / gran * gran : a.size;
    CK(cuMemAddressReserve(&a.base, a.reserved, 0, hint, 0));
    if (hint != 0 && a.base != hint) {
        std::fprintf(stderr, "recorder: note: the driver placed the arena at 0x%llx (hint 0x%llx)\n",
                     (unsigned long long)a.base, (unsigned long long)ARENA_HINT);
    }
    CK(cuMemCreate(&a.handle, a.size, &prop, 0));
    CK(cuMemMap(a.base, a.size, 0, a.handle, 0));
    CUmemAccessDesc desc;
    std::memset(&desc, 0, sizeof(desc));
    desc.location = prop.location;
    desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CK(cuMemSetAccess(a.base, a.size, &desc, 1));
    CK(cuMemsetD8(a.base, 0, a.size));
    return a;
}

static void put_u32(std::vector<char>& v, uint32_t x) {
    v.insert(v.end(), (const char*)&x, (const char*)&x + 4);
}
static void put_u64(std::vector<char>& v, uint64_t x) {
    v.insert(v.end(), (const char*)&x, (const char*)&x + 8);
}

// Native globals table: u32 count, then per global u32 name length
// (including the NUL), u64 size, name + NUL, data.
static std::vector<char> save_globals(CUmodule mod, const std::vector<std::string>& names) {
    std::vector<char> out;
    put_u32(out, (uint32_t)names.size());
    for (const std::string& name : names) {
        CUdeviceptr p = 0;
        size_t n = 0;
        CK(cuModuleGetGlobal(&p, &n, mod, name.c_str()));
        std::vector<char> data(n);
        CK(cuMemcpyDtoH(data.data(), p, n));
        put_u32(out, (uint32_t)(name.size() + 1));
        put_u64(out, (uint64_t)n);
        out.insert(out.end(), name.begin(), name.end());
        out.push_back('\0');
        out.insert(out.end(), data.begin(), data.end());
    }
    return out;
}

static void set_global(CUmodule mod, const char* name, const void* data, size_t n) {
    CUdeviceptr p = 0;
    size_t have = 0;
    CK(cuModuleGetGlobal(&p, &have, mod, name));
    if (have != n) {
        std::fprintf(stderr, "recorder: global %s has %zu bytes, expected %zu\n", name, have, n);
        std::exit(1);
    }
    CK(cuMemcpyHtoD(p, data, n));
}

static void snapshot(const Arena& a, const std::string& path) {
    std::vector<char> buf(a.used);
    CK(cuCtxSynchronize());
    CK(cuMemcpyDtoH(buf.data(), a.base, a.used));
    write_file(path, buf.data(), buf.size());
}

static int bandwidth(size_t bytes) {
    CUdevice dev;
    CUcontext ctx;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    void* host = nullptr;
    CUdeviceptr d = 0;
    CK(cuMemHostAlloc(&host, bytes, 0));
    std::memset(host, 0x5a, bytes);
    CK(cuMemAlloc(&d, bytes));
    CK(cuMemcpyHtoD(d, host, bytes));  // warm-up
    double best = 1e30;
    for (int i = 0; i < 5; i++) {
        auto t0 = std::chrono::steady_clock::now();
        CK(cuMemcpyHtoD(d, host, bytes));
        CK(cuCtxSynchronize());
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (s < best) best = s;
    }
    std::printf("plain_pinned_h2d bytes=%zu best_s=%.6f gbps=%.2f\n", bytes, best,
                (double)bytes / best / 1e9);
    CK(cuMemFree(d));
    CK(cuMemFreeHost(host));
    return 0;
}

int main(int argc, char** argv) {
    if (argc == 3 && std::string(argv[1]) == "bandwidth") {
        return bandwidth((size_t)std::strtoull(argv[2], nullptr, 10));
    }
    if (argc != 4) {
        std::fprintf(stderr, "usage: recorder <kernels.cubin> <outdir> saxpy|smem|big\n"
                             "       recorder bandwidth <bytes>\n");
        return 2;
    }
    const std::string cubin_path = argv[1], outdir = argv[2], which = argv[3];
    std::vector<char> cubin = read_file(cubin_path);

    CUdevice dev;
    CUcontext ctx;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    CUmodule mod;
    CK(cuModuleLoadData(&mod, cubin.data()));

    std::string kernel;
    std::vector<uint64_t> args;
    uint64_t teams = 0, threads = 0, shared = 0, trip = 0;
    Arena a;

    const double g_scale = 2.0;
    const uint64_t g_table[4] = {3, 5, 7, 11};
    set_global(mod, "g_scale", &g_scale, sizeof(g_scale));
    set_global(mod, "g_table", g_table, sizeof(g_table));
    std::vector<std::string> globals_saved = {"g_scale", "g_table"};
    // 8-byte values written after the input snapshot, before the launch.
    std::vector<std::pair<CUdeviceptr, uint64_t>> after_snapshot;
    // What the replay of this case must end with (scripts/gpu-check.sh).
    const char* expect = "verified";

    if (which == "saxpy") {
        const uint64_t n = 1 << 20;
        a = make_arena(dev, 64ull << 20);
        CUdeviceptr env = a.alloc(sizeof(LaunchEnv));
        CUdeviceptr x = a.alloc(n * 4);
        CUdeviceptr y = a.alloc(n * 4);
        LaunchEnv e = {RR_MAGIC, n};
        CK(cuMemcpyHtoD(env, &e, sizeof(e)));
        std::vector<float> hx(n), hy(n);
        for (uint64_t i = 0; i < n; i++) {
            hx[i] = (float)(i % 1000) * 0.25f;
            hy[i] = (float)(i % 77) - 3.0f;
        }
        CK(cuMemcpyHtoD(x, hx.data(), n * 4));
        CK(cuMemcpyHtoD(y, hy.data(), n * 4));
        double alpha = 1.5;
        uint64_t alpha_bits;
        std::memcpy(&alpha_bits, &alpha, 8);
        kernel = "rr_saxpy";
        args = {env, x, y, alpha_bits, n};
        threads = 256;
        teams = (n + threads - 1) / threads;
        trip = n;
    } else if (which == "smem") {
        const uint64_t words_per_block = 16384;  // 64 KiB of dynamic shared memory
        const uint64_t blocks = 128;
        const uint64_t n = words_per_block * blocks;
        a = make_arena(dev, 64ull << 20);
        CUdeviceptr env = a.alloc(sizeof(LaunchEnv));
        CUdeviceptr in = a.alloc(n * 4);
        CUdeviceptr out = a.alloc(n * 4);
        LaunchEnv e = {RR_MAGIC, n};
        CK(cuMemcpyHtoD(env, &e, sizeof(e)));
        std::vector<uint32_t> h(n);
        for (uint64_t i = 0; i < n; i++) h[i] = (uint32_t)(i * 2654435761ull);
        CK(cuMemcpyHtoD(in, h.data(), n * 4));
        kernel = "rr_block_reverse";
        args = {env, in, out, words_per_block};
        teams = blocks;
        threads = 256;
        shared = words_per_block * 4;
        trip = n;
    } else if (which == "big" || which.rfind("size", 0) == 0) {
        // big: a 1 GiB snapshot; sizeN[kmg] (size4k, size1m, size16m,
        // size256m): an N-byte one. Half pseudo-random input words, half an
        // output buffer that is zero before the launch.
        uint64_t bytes = 1ull << 30;
        if (which != "big") {
            char* unit = nullptr;
            bytes = std::strtoull(which.c_str() + 4, &unit, 10);
            const std::string u = unit ? unit : "";
            bytes <<= u == "k" ? 10 : u == "m" ? 20 : u == "g" ? 30 : 0;
            if (bytes < 4096 || (u != "k" && u != "m" && u != "g")) {
                std::fprintf(stderr, "recorder: %s: want sizeN with N >= 4k and unit k, m or g\n",
                             which.c_str());
                return 2;
            }
        }
        const uint64_t n = bytes / 8;
        a = make_arena(dev, bytes + (64ull << 20));
        CUdeviceptr env = a.alloc(sizeof(LaunchEnv));
        CUdeviceptr in = a.alloc(n * 4);
        CUdeviceptr out = a.alloc(n * 4);
        LaunchEnv e = {RR_MAGIC, n};
        CK(cuMemcpyHtoD(env, &e, sizeof(e)));
        std::vector<uint32_t> h(n);
        uint64_t s = 0x9e3779b97f4a7c15ull;
        for (uint64_t i = 0; i < n; i++) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            h[i] = (uint32_t)(s >> 16);
        }
        CK(cuMemcpyHtoD(in, h.data(), n * 4));
        kernel = "rr_big";
        args = {env, in, out, n, 12345};
        threads = 512;
        teams = std::min<uint64_t>(1024, (n + threads - 1) / threads);
        trip = n;
    } else if (which == "smem48") {
        const uint64_t words = 49152 / 4, blocks = 64, n = words * blocks;
        a = make_arena(dev, 64ull << 20);
        CUdeviceptr env = a.alloc(sizeof(LaunchEnv));
        CUdeviceptr in = a.alloc(n * 4);
        CUdeviceptr out = a.alloc(n * 4);
        LaunchEnv e = {RR_MAGIC, n};
        CK(cuMemcpyHtoD(env, &e, sizeof(e)));
        std::vector<uint32_t> h(n);
        for (uint64_t i = 0; i < n; i++) h[i] = (uint32_t)(i * 40503u + 17);
        CK(cuMemcpyHtoD(in, h.data(), n * 4));
        kernel = "rr_smem48";
        args = {env, in, out};
        teams = blocks;
        threads = 256;
        shared = 49152;
        trip = n;
    } else if (which == "bigglobal") {
        const uint64_t n = 1 << 20;
        a = make_arena(dev, 64ull << 20);
        CUdeviceptr env = a.alloc(sizeof(LaunchEnv));
        CUdeviceptr out = a.alloc(n * 4);
        LaunchEnv e = {RR_MAGIC, n};
        CK(cuMemcpyHtoD(env, &e, sizeof(e)));
        std::vector<uint32_t> g(512 * 1024);
        for (size_t i = 0; i < g.size(); i++) g[i] = (uint32_t)(i * 2654435761u) ^ 0x1234u;
        set_global(mod, "g_big", g.data(), g.size() * 4);
        globals_saved.push_back("g_big");
        kernel = "rr_bigglobal";
        args = {env, out, n};
        threads = 256;
        teams = n / threads;
        trip = n;
    } else if (which == "sentinel") {
        const uint64_t n = 1 << 16;
        a = make_arena(dev, 64ull << 20);
        CUdeviceptr out = a.alloc(n * 4);
        kernel = "rr_sentinel";
        args = {~0ull, out, n};
        threads = 128;
        teams = n / threads;
        trip = n;
    } else if (which == "sparse") {
        // 8 MiB used of a 4 GiB reservation placed by the driver itself.
        const uint64_t n = (4ull << 20) / 4;
        a = make_arena(dev, 8ull << 20, 4ull << 30, 0);
        CUdeviceptr env = a.alloc(sizeof(LaunchEnv));
        CUdeviceptr in = a.alloc(n * 4);
        CUdeviceptr out = a.alloc(n * 2);
        LaunchEnv e = {RR_MAGIC, n / 2};
        CK(cuMemcpyHtoD(env, &e, sizeof(e)));
        std::vector<uint32_t> h(n);
        for (uint64_t i = 0; i < n; i++) h[i] = (uint32_t)(i ^ 0x5a5a5a5au);
        CK(cuMemcpyHtoD(in, h.data(), n * 4));
        kernel = "rr_big";
        args = {env, in, out, n / 2, 777};
        teams = 256;
        threads = 256;
        trip = n / 2;
    } else if (which == "ptrstruct") {
        // The kernel's data is reached only through pointers stored in the
        // arena (a struct) and in a __device__ global (a declare-target
        // pointer), as OpenMP's attach semantics leave them.
        const uint64_t n = 1 << 18;
        a = make_arena(dev, 64ull << 20);
        CUdeviceptr env = a.alloc(sizeof(LaunchEnv));
        CUdeviceptr s = a.alloc(3 * 8);
        CUdeviceptr in = a.alloc(n * 4);
        CUdeviceptr out = a.alloc(n * 4);
        CUdeviceptr lut = a.alloc(256 * 4);
        LaunchEnv e = {RR_MAGIC, n};
        CK(cuMemcpyHtoD(env, &e, sizeof(e)));
        const uint64_t sv[3] = {(uint64_t)in, (uint64_t)out, n};
        CK(cuMemcpyHtoD(s, sv, sizeof(sv)));
        std::vector<uint32_t> h(n), l(256);
        for (uint64_t i = 0; i < n; i++) h[i] = (uint32_t)(i * 2246822519u);
        for (uint32_t i = 0; i < 256; i++) l[i] = i * i + 1;
        CK(cuMemcpyHtoD(in, h.data(), n * 4));
        CK(cuMemcpyHtoD(lut, l.data(), 256 * 4));
        const uint64_t lut_ptr = lut;
        set_global(mod, "g_lut", &lut_ptr, sizeof(lut_ptr));
        globals_saved.push_back("g_lut");
        kernel = "rr_ptrstruct";
        args = {env, s};
        threads = 256;
        teams = n / threads;
        trip = n;
    } else if (which == "spin") {
        a = make_arena(dev, 64ull << 20);
        CUdeviceptr env = a.alloc(sizeof(LaunchEnv));
        CUdeviceptr flag = a.alloc(8);
        CUdeviceptr out = a.alloc(64 * 4);
        LaunchEnv e = {RR_MAGIC, 0};
        CK(cuMemcpyHtoD(env, &e, sizeof(e)));
        after_snapshot.push_back({flag, 1});
        kernel = "rr_spin";
        args = {env, flag, out};
        teams = 1;
        threads = 64;
        expect = "timeout";
    } else if (which == "wild") {
        a = make_arena(dev, 64ull << 20);
        CUdeviceptr env = a.alloc(sizeof(LaunchEnv));
        CUdeviceptr slot = a.alloc(8);
        CUdeviceptr out = a.alloc(64 * 4);
        LaunchEnv e = {RR_MAGIC, 0};
        CK(cuMemcpyHtoD(env, &e, sizeof(e)));
        const uint64_t wild = 0x10;  // never mapped
        CK(cuMemcpyHtoD(slot, &wild, 8));
        after_snapshot.push_back({slot, (uint64_t)out});
        kernel = "rr_wild_store";
        args = {env, slot};
        teams = 1;
        threads = 64;
        expect = "fault";
    } else {
        std::fprintf(stderr, "recorder: unknown case %s\n", which.c_str());
        return 2;
    }

    CUfunction f;
    CK(cuModuleGetFunction(&f, mod, kernel.c_str()));
    if (shared >= 48 * 1024) {
        CK(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)shared));
    }

    const std::string stem = outdir + "/rec";
    std::vector<char> globals = save_globals(mod, globals_saved);
    write_file(stem + ".globals", globals.data(), globals.size());
    write_file(stem + ".image", cubin.data(), cubin.size());
    snapshot(a, stem + ".record_input");
    for (const auto& p : after_snapshot) CK(cuMemcpyHtoD(p.first, &p.second, 8));

    std::vector<void*> params(args.size());
    for (size_t i = 0; i < args.size(); i++) params[i] = &args[i];
    CK(cuLaunchKernel(f, (unsigned)teams, 1, 1, (unsigned)threads, 1, 1, (unsigned)shared, 0,
                      params.data(), nullptr));
    CK(cuCtxSynchronize());
    snapshot(a, stem + ".record_output");

    std::string json = "{\"Name\":\"" + kernel + "\",\"NumArgs\":" + std::to_string(args.size()) +
                       ",\"NumTeams\":" + std::to_string(teams) +
                       ",\"NumThreads\":" + std::to_string(threads) +
                       ",\"SharedMemorySize\":" + std::to_string(shared) +
                       ",\"LoopTripCount\":" + std::to_string(trip) +
                       ",\"DeviceId\":0,\"VAllocAddr\":" + std::to_string((unsigned long long)a.base) +
                       ",\"VAllocSize\":" + std::to_string(a.reserved) +
                       ",\"TeamsLimits\":[0,0],\"ThreadsLimits\":[0,0],\"ArgPtrs\":[";
    for (size_t i = 0; i < args.size(); i++) {
        if (i) json += ",";
        json += std::to_string((long long)args[i]);
    }
    json += "],\"ArgOffsets\":[";
    for (size_t i = 0; i < args.size(); i++) json += i ? ",0" : "0";
    json += "]}";
    write_file(stem + ".json", json.data(), json.size());
    write_file(outdir + ".expect", expect, std::strlen(expect));
    std::printf("recorded %s: kernel %s teams=%llu threads=%llu shared=%llu arena=0x%llx used=%zu "
                "reserved=%zu\n",
                which.c_str(), kernel.c_str(), (unsigned long long)teams,
                (unsigned long long)threads, (unsigned long long)shared,
                (unsigned long long)a.base, a.used, a.reserved);

    CK(cuModuleUnload(mod));
    CK(cuMemUnmap(a.base, a.size));
    CK(cuMemRelease(a.handle));
    CK(cuMemAddressFree(a.base, a.reserved));
    CK(cuDevicePrimaryCtxRelease(dev));
    return 0;
}
