/* Checks, at compile time, that the HIP structs and values rrstore's HIP
 * backend hard-codes (replay/src/backend/gpu/hip/ffi.rs: it loads
 * libamdhip64.so at run time and has no headers to read) match this
 * machine's HIP headers. Build it on the AMD machine before the first run:
 *
 *   scripts/hip-check.sh        (or by hand:)
 *   cc -fsyntax-only -D__HIP_PLATFORM_AMD__ -I/opt/rocm/include tests/gpu/hip_layouts.c
 *
 * It compiles only when every CHECK holds; a failing one names the field.
 * A unit test (hip::ffi::tests::the_c_layout_check_lists_every_constant)
 * keeps the CHECK lines and the Rust constants the same. */
#include <stddef.h>
#include <hip/hip_runtime_api.h>

#define CHECK(expr, value) _Static_assert((expr) == (value), #expr " is not " #value " here: update replay/src/backend/gpu/hip/ffi.rs")

#if HIP_VERSION_MAJOR < 6
#error "rrstore's HIP backend targets HIP 6.x/7.x (hipGetDevicePropertiesR0600); this is an older HIP"
#endif

/* Error codes. */
CHECK(hipSuccess, 0);
CHECK(hipErrorNoDevice, 100);
CHECK(hipErrorInvalidImage, 200);
CHECK(hipErrorNoBinaryForGpu, 209);
CHECK(hipErrorInvalidSymbol, 13);
CHECK(hipErrorNotFound, 500);
CHECK(hipErrorNotReady, 600);

/* Enum and flag values. */
CHECK(hipMemAllocationTypePinned, 1);
CHECK(hipMemHandleTypeNone, 0);
CHECK(hipMemLocationTypeDevice, 1);
CHECK(hipMemAccessFlagsProtReadWrite, 3);
CHECK(hipMemAllocationGranularityMinimum, 0);
CHECK(hipStreamNonBlocking, 1);
CHECK(hipEventDefault, 0);
CHECK(hipEventDisableTiming, 2);
CHECK(hipDeviceAttributeMaxThreadsPerMultiProcessor, 57);
CHECK(hipDeviceAttributeMultiprocessorCount, 63);
CHECK(hipDeviceAttributeWarpSize, 87);
CHECK(hipDeviceAttributeWallClockRate, 10017);
CHECK(hipHostMallocDefault, 0);
CHECK(hipLimitStackSize, 0);

/* Struct layouts. */
CHECK(sizeof(hipMemLocation), 8);
CHECK(sizeof(((hipMemAllocationProp *)0)->allocFlags), 4);
CHECK(offsetof(hipMemAllocationProp, type), 0);
CHECK(offsetof(hipMemAllocationProp, requestedHandleType), 4);
CHECK(offsetof(hipMemAllocationProp, location), 8);
CHECK(offsetof(hipMemAllocationProp, win32HandleMetaData), 16);
CHECK(offsetof(hipMemAllocationProp, allocFlags), 24);
CHECK(sizeof(hipMemAllocationProp), 32);
CHECK(sizeof(hipMemAccessDesc), 12);
CHECK(offsetof(hipMemAccessDesc, flags), 8);
CHECK(offsetof(hipDeviceProp_tR0600, uuid), 256);
CHECK(offsetof(hipDeviceProp_tR0600, gcnArchName), 1160);
CHECK(sizeof(((hipDeviceProp_tR0600 *)0)->gcnArchName), 256);
CHECK(sizeof(hipDeviceProp_tR0600) <= 8192, 1);
