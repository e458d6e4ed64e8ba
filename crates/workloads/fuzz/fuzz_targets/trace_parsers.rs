//! Fuzzes the block-trace parsers: arbitrary bytes, as plain text and gzip-wrapped, in every format, strict and
//! lenient, with an arbitrary block size. The reader must never panic, must yield only valid block ranges, and its
//! counters must add up.
#![no_main]

use std::io::{Cursor, Write};

use libfuzzer_sys::fuzz_target;
use workloads::traces::{TraceError, TraceFormat, TraceOptions, TraceReader};

fuzz_target!(|data: &[u8]| {
    let Some((&control, body)) = data.split_first() else { return };
    let format = TraceFormat::ALL[(control % 3) as usize];
    let strict = control & 0x4 != 0;
    let block_size = match control >> 3 {
        0 => 1,
        1 => 512,
        n => 4096 * n as u64,
    };
    let input = if control & 0x8 != 0 {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        let _ = e.write_all(body);
        e.finish().unwrap_or_default()
    } else {
        body.to_vec()
    };
    let mut opts = TraceOptions::new(format);
    opts.strict = strict;
    opts.block_size = block_size;
    let Ok(mut reader) = TraceReader::from_reader(Cursor::new(input), opts) else { return };
    let items: Vec<_> = reader.by_ref().collect();
    let mut ok = 0u64;
    let mut errors = 0u64;
    for item in &items {
        match item {
            Ok(op) => {
                assert!(op.first_block <= op.last_block);
                assert!((op.volume as usize) < reader.volumes().len());
                ok += 1;
            }
            Err(TraceError::Malformed { line, .. }) => {
                assert!(strict && *line >= 1);
                errors += 1;
            }
            Err(_) => errors += 1,
        }
    }
    assert!(errors <= 1, "iteration continued after an error");
    assert!(items.last().is_none_or(|last| last.is_ok() || errors == 1));
    let stats = reader.stats();
    assert_eq!(stats.ops, ok);
    assert_eq!(stats.reads + stats.writes, stats.ops);
    assert!(stats.ops + stats.blank + stats.malformed + stats.filtered <= stats.lines);
});
