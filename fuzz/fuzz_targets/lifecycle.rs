//! `lifecycle`: bytes → sequences of push, wait, quiesce, resume, shutdown
//! and simulated fork from up to three threads
//! (forksafe_proptests::lifecycle); any panic, hang or lost op aborts.

#![no_main]

use forksafe_proptests::{decode_lifecycle, run_lifecycle};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let life = decode_lifecycle(data);
    if let Err(e) = run_lifecycle(&life) {
        forksafe_proptests::forking::say(&format!("{e}\n{life:?}\n"));
        std::process::abort();
    }
});
