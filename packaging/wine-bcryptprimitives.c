/* bcryptprimitives.dll for the wine check only (packaging/check.sh jvm_win64): Rust's standard
 * library draws random bytes through ProcessPrng from bcryptprimitives.dll, which every Windows
 * Rust supports has, but Debian 12's wine 8.0 does not. This one answers ProcessPrng from
 * RtlGenRandom (advapi32's SystemFunction036), which wine has. Never shipped: dist/ has none. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length) {
    while (length > 0) {
        ULONG chunk = length > 0x10000000 ? 0x10000000 : (ULONG)length;
        if (!SystemFunction036(data, chunk)) {
            return FALSE;
        }
        data += chunk;
        length -= chunk;
    }
    return TRUE;
}
