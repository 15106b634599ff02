/* dllcheck.exe DLL: loads the JVM binding's Windows library the way JNA does (LoadLibrary, so
 * Windows' loader resolves every import), then calls two of its uniffi exports that need no
 * arguments: the contract version (what the Kotlin glue checks first) and the checksum of
 * `connect`. Prints both; exits 1 when the library or a symbol is missing. Run under wine by
 * packaging/check.sh win64 (no Windows JVM or Python can run here). */
#include <stdio.h>
#include <windows.h>

typedef unsigned int (*contract_version_fn)(void);
typedef unsigned short (*checksum_fn)(void);

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: dllcheck.exe PATH\\lockgate_jvm.dll\n");
        return 2;
    }
    HMODULE lib = LoadLibraryA(argv[1]);
    if (lib == NULL) {
        fprintf(stderr, "LoadLibrary(%s) failed: error %lu\n", argv[1], GetLastError());
        return 1;
    }
    contract_version_fn version = (contract_version_fn)GetProcAddress(lib, "ffi_lockgate_jvm_uniffi_contract_version");
    checksum_fn connect_checksum = (checksum_fn)GetProcAddress(lib, "uniffi_lockgate_jvm_checksum_func_connect");
    if (version == NULL || connect_checksum == NULL) {
        fprintf(stderr, "%s lacks the uniffi exports\n", argv[1]);
        return 1;
    }
    printf("loaded contract_version %u connect_checksum %u\n", version(), (unsigned)connect_checksum());
    return 0;
}
