//! `uniffi-bindgen generate --library target/<profile>/liblockgate_jvm.so --language kotlin ...`
fn main() {
    uniffi::uniffi_bindgen_main()
}
