//! The SSE decoder: any bytes, any chunking. The events are the same
//! whatever the chunking, there are never more events than bytes, and the
//! decoder never holds more than it was given and has not handed back
//! (checked inside [`sse_events`]).

use proptest::prelude::*;
use proptest::sample::Index;

use crate::support::*;

/// Events of `bytes` read whole and read in the pieces `cuts` makes.
fn same_whatever_the_chunking(bytes: Vec<u8>, cuts: Vec<Index>) {
    within("sse", move || {
        let whole = sse_events(&[&bytes]);
        let pieces = sse_events(&split(&bytes, &cuts));
        assert_eq!(whole, pieces, "chunking changed the events");
        if bytes.len() <= 4096 {
            let drip: Vec<&[u8]> = bytes.chunks(1).collect();
            assert_eq!(whole, sse_events(&drip), "byte-by-byte changed the events");
        }
        let raw: usize = whole.iter().map(|e| e.raw.len()).sum();
        assert!(raw <= bytes.len());
    });
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn arbitrary_bytes(bytes in noise(512), cuts in cuts()) {
        same_whatever_the_chunking(bytes, cuts);
    }

    #[test]
    fn real_streams_mangled(f in any::<Index>(), edits in edits(), cuts in cuts()) {
        let bytes = apply(f.get::<Vec<u8>>(&ALL_SSE_HEADS), &edits);
        same_whatever_the_chunking(bytes, cuts);
    }
}

proptest! {
    #![proptest_config(config(64))]

    /// A valid stream gives its events in any chunking.
    #[test]
    fn real_streams_in_any_chunking(f in any::<Index>(), cuts in cuts()) {
        let f = f.get(&ALL_SSE);
        let bytes = f.bytes.clone();
        let whole = sse_events(&[&bytes]);
        prop_assert!(!whole.is_empty(), "{}", f.name);
        let pieces = within("sse", move || sse_events(&split(&bytes, &cuts)));
        prop_assert_eq!(whole, pieces, "{}", &f.name);
    }
}
