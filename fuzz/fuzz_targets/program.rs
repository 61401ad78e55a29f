//! `program`: bytes → program (forksafe_proptests::decode) → run on the
//! real engine beside the serial reference; any difference, hang (a wait
//! past its bound) or contract violation inside an op body aborts.
//! Fork statements are skipped (forking per input would swamp the fuzzer;
//! the property tests cover forks).

#![no_main]

use forksafe_proptests::{decode, run_program, Options};
use libfuzzer_sys::fuzz_target;
use std::sync::Once;

static HOOK: Once = Once::new();

fuzz_target!(|data: &[u8]| {
    HOOK.call_once(forksafe_proptests::forking::quiet_panic_hook);
    let program = decode(data);
    if let Err(e) = run_program(&program, &Options::default()) {
        forksafe_proptests::forking::say(&format!("{e}\n{program}"));
        std::process::abort();
    }
});
