//! Trace parsers: each format's sample lines, malformed lines with their numbers, gzip, strict and lenient modes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{Cursor, Write};

use common::for_each_seed;
use flate2::Compression;
use flate2::write::GzEncoder;
use workloads::Rng;
use workloads::traces::{
    BlockOp, IoKind, LineError, TraceError, TraceFormat, TraceOptions, TraceReader, Volumes, parse_line,
};

fn read_all(text: &[u8], opts: TraceOptions) -> (Vec<BlockOp>, TraceReader) {
    let mut r = TraceReader::from_reader(Cursor::new(text.to_vec()), opts).unwrap();
    let ops: Vec<BlockOp> = r.by_ref().map(|o| o.unwrap()).collect();
    (ops, r)
}

fn op(volume: u32, kind: IoKind, first_block: u64, last_block: u64) -> BlockOp {
    BlockOp { volume, kind, first_block, last_block }
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::new(), Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

const ALIBABA: &[u8] = b"1,W,0,4096,1000\n\
1,R,4096,8192,1001\n\
2,W,1024,4096,1002\n\
1,W,12288,1,1003\n";

#[test]
fn alibaba_lines() {
    let (ops, r) = read_all(ALIBABA, TraceOptions::new(TraceFormat::Alibaba));
    assert_eq!(
        ops,
        vec![
            op(0, IoKind::Write, 0, 0),
            op(0, IoKind::Read, 1, 2),
            // 1024..5120 spans blocks 0 and 1: start rounded down, end up.
            op(1, IoKind::Write, 0, 1),
            op(0, IoKind::Write, 3, 3),
        ]
    );
    assert_eq!(r.volumes().name(0), "1");
    assert_eq!(r.volumes().name(1), "2");
    let s = r.stats();
    assert_eq!((s.lines, s.ops, s.reads, s.writes, s.malformed, s.gzip), (4, 4, 1, 3, 0, false));
}

#[test]
fn tencent_lines() {
    let text = b"1538323200,0,8,1,1063\n1538323200,8,16,0,1063\n1538323201,3,1,1,7\n";
    let (ops, r) = read_all(text, TraceOptions::new(TraceFormat::Tencent));
    assert_eq!(
        ops,
        vec![
            op(0, IoKind::Write, 0, 0),
            op(0, IoKind::Read, 1, 2),
            // Sector 3 (bytes 1536..2048) lies in block 0.
            op(1, IoKind::Write, 0, 0),
        ]
    );
    assert_eq!(r.volumes().name(0), "1063");
    assert_eq!(r.volumes().name(1), "7");
}

#[test]
fn msr_lines() {
    let text = b"128166372003061629,hm,0,Write,3216253952,4096,1593\n\
128166372016382155,hm,0,Read,3216253952,16384,3399\n\
128166372026382245,src1,2,Write,512,512,100\n";
    let (ops, r) = read_all(text, TraceOptions::new(TraceFormat::Msr));
    // 3216253952 is not block aligned (785218.25 blocks): each request straddles one more block.
    let b = 3216253952 / 4096;
    assert_eq!(b, 785218);
    assert_eq!(
        ops,
        vec![op(0, IoKind::Write, b, b + 1), op(0, IoKind::Read, b, b + 4), op(1, IoKind::Write, 0, 0)]
    );
    assert_eq!(r.volumes().name(0), "hm_0");
    assert_eq!(r.volumes().name(1), "src1_2");
}

#[test]
fn block_size_option_changes_the_conversion() {
    let mut opts = TraceOptions::new(TraceFormat::Alibaba);
    opts.block_size = 512;
    let (ops, _) = read_all(b"1,W,1024,4096,1\n", opts);
    assert_eq!(ops, vec![op(0, IoKind::Write, 2, 9)]);
    let mut opts = TraceOptions::new(TraceFormat::Alibaba);
    opts.block_size = 0;
    assert!(matches!(
        TraceReader::from_reader(Cursor::new(vec![]), opts),
        Err(TraceError::InvalidArgument(_))
    ));
}

#[test]
fn spaces_crlf_and_blank_lines_are_tolerated() {
    let text = b"1, W ,0,4096,1\r\n\n   \n1,R,0,4096,2\r\n";
    let (ops, r) = read_all(text, TraceOptions::new(TraceFormat::Alibaba));
    assert_eq!(ops, vec![op(0, IoKind::Write, 0, 0), op(0, IoKind::Read, 0, 0)]);
    assert_eq!(r.stats().blank, 2);
    assert_eq!(r.stats().malformed, 0);
}

/// One malformed line of each kind, per format, with the error each must produce.
fn malformed_cases() -> Vec<(TraceFormat, &'static [u8], LineError)> {
    use LineError::*;
    vec![
        (TraceFormat::Alibaba, b"1,W,0,4096", FieldCount { expected: 5, found: 4 }),
        (TraceFormat::Alibaba, b"1,W,0,4096,1,9", FieldCount { expected: 5, found: 6 }),
        (TraceFormat::Alibaba, b"1,X,0,4096,1", BadOpcode),
        (TraceFormat::Alibaba, b"1,w,0,4096,1", BadOpcode),
        (TraceFormat::Alibaba, b"1,W,-5,4096,1", BadNumber { field: "offset_bytes" }),
        (TraceFormat::Alibaba, b"1,W,0,12ab,1", BadNumber { field: "length_bytes" }),
        (TraceFormat::Alibaba, b"1,W,0,99999999999999999999,1", BadNumber { field: "length_bytes" }),
        (TraceFormat::Alibaba, b"1,W,0,4096,soon", BadNumber { field: "timestamp_us" }),
        (TraceFormat::Alibaba, b",W,0,4096,1", EmptyField { field: "device_id" }),
        (TraceFormat::Alibaba, b"1,W,0,0,1", ZeroLength),
        (TraceFormat::Alibaba, b"1,W,18446744073709551615,2,1", Overflow),
        (TraceFormat::Alibaba, b"1,W,0,\xff\xfe,1", BadEncoding),
        (TraceFormat::Alibaba, b"1,W,0\x00,4096,1", BadEncoding),
        (TraceFormat::Alibaba, b"device_id,opcode,offset,length,timestamp", BadOpcode),
        (TraceFormat::Tencent, b"1,0,8,2,1063", BadOpcode),
        (TraceFormat::Tencent, b"1,0,0,1,1063", ZeroLength),
        (TraceFormat::Tencent, b"1,36028797018963968,1,1,5", Overflow),
        (TraceFormat::Tencent, b"1,0,8,1", FieldCount { expected: 5, found: 4 }),
        (TraceFormat::Tencent, b"1.5.2,0,8,1,3", BadNumber { field: "timestamp_s" }),
        (TraceFormat::Msr, b"1,hm,0,Write,0,4096", FieldCount { expected: 7, found: 6 }),
        (TraceFormat::Msr, b"1,hm,zero,Write,0,4096,1", BadNumber { field: "disk" }),
        (TraceFormat::Msr, b"1,hm,0,write,0,4096,1", BadOpcode),
        (TraceFormat::Msr, b"1,,0,Write,0,4096,1", EmptyField { field: "hostname" }),
        (TraceFormat::Msr, b"1,hm,0,Read,0,0,1", ZeroLength),
        (TraceFormat::Msr, b"1,hm,0,Read,0,4096,", EmptyField { field: "response_time" }),
    ]
}

#[test]
fn every_malformed_line_gets_its_typed_error() {
    for (format, line, want) in malformed_cases() {
        let got = parse_line(format, line, 4096, &mut Volumes::new());
        assert_eq!(got, Err(want.clone()), "{format:?} {:?}", String::from_utf8_lossy(line));
    }
}

#[test]
fn lenient_mode_counts_and_skips_with_line_numbers() {
    let text = b"1,W,0,4096,1\nbad line\n1,W,0,0,2\n1,R,0,4096,3\n1,Q,0,4096,4\n";
    let (ops, r) = read_all(text, TraceOptions::new(TraceFormat::Alibaba));
    assert_eq!(ops, vec![op(0, IoKind::Write, 0, 0), op(0, IoKind::Read, 0, 0)]);
    let s = r.stats();
    assert_eq!(s.malformed, 3);
    assert_eq!(
        s.first_malformed,
        vec![
            (2, LineError::FieldCount { expected: 5, found: 1 }),
            (3, LineError::ZeroLength),
            (5, LineError::BadOpcode)
        ]
    );
    let mut opts = TraceOptions::new(TraceFormat::Alibaba);
    opts.keep_malformed = 1;
    let (_, r) = read_all(text, opts);
    assert_eq!((r.stats().malformed, r.stats().first_malformed.len()), (3, 1));
}

#[test]
fn strict_mode_stops_at_the_first_malformed_line() {
    let text = b"1,W,0,4096,1\n1,W,0,4096,2\n1,W,oops,4096,3\n1,W,0,4096,4\n";
    let mut opts = TraceOptions::new(TraceFormat::Alibaba);
    opts.strict = true;
    let mut r = TraceReader::from_reader(Cursor::new(text.to_vec()), opts).unwrap();
    assert!(r.next().unwrap().is_ok());
    assert!(r.next().unwrap().is_ok());
    match r.next() {
        Some(Err(TraceError::Malformed {
            line: 3,
            error: LineError::BadNumber { field: "offset_bytes" },
        })) => {}
        other => panic!("unexpected {other:?}"),
    }
    assert!(r.next().is_none(), "nothing after a strict error");
    let e = TraceError::Malformed { line: 3, error: LineError::ZeroLength };
    assert_eq!(e.to_string(), "line 3: zero-length request");
}

#[test]
fn overlong_lines_are_reported_not_buffered() {
    let mut text = b"1,W,0,4096,1\n".to_vec();
    text.extend(std::iter::repeat_n(b'7', 100_000));
    text.extend_from_slice(b"\n1,R,0,4096,2");
    let (ops, r) = read_all(&text, TraceOptions::new(TraceFormat::Alibaba));
    assert_eq!(ops.len(), 2, "the line after the long one and the unterminated last line are read");
    assert_eq!(r.stats().first_malformed, vec![(2, LineError::TooLong { len: 100_000 })]);
}

#[test]
fn volume_filter_keeps_one_volume() {
    let mut opts = TraceOptions::new(TraceFormat::Alibaba);
    opts.volume = Some("2".into());
    let (ops, r) = read_all(ALIBABA, opts);
    assert_eq!(ops.len(), 1);
    assert_eq!(r.volumes().name(ops[0].volume), "2");
    assert_eq!(r.stats().filtered, 3);
}

#[test]
fn gzip_is_detected_and_read() {
    for format in TraceFormat::ALL {
        let plain: &[u8] = match format {
            TraceFormat::Alibaba => ALIBABA,
            TraceFormat::Tencent => b"1,0,8,1,1063\n1,8,16,0,1063\n",
            TraceFormat::Msr => b"1,hm,0,Write,0,4096,1\n2,hm,0,Read,0,8192,1\n",
        };
        let (want, _) = read_all(plain, TraceOptions::new(format));
        let (got, r) = read_all(&gzip(plain), TraceOptions::new(format));
        assert_eq!(got, want);
        assert!(r.stats().gzip);
        // Concatenated members read as one stream.
        let mut two = gzip(plain);
        two.extend(gzip(plain));
        let (got, _) = read_all(&two, TraceOptions::new(format));
        assert_eq!(got.len(), 2 * want.len());
    }
}

#[test]
fn corrupt_and_truncated_gzip_are_corruption_not_io() {
    let big: Vec<u8> = (0..5000).flat_map(|i| format!("1,W,{},4096,{i}\n", i * 4096).into_bytes()).collect();
    let gz = gzip(&big);
    let truncated = &gz[..gz.len() / 2];
    let mut r =
        TraceReader::from_reader(Cursor::new(truncated.to_vec()), TraceOptions::new(TraceFormat::Alibaba))
            .unwrap();
    let results: Vec<_> = r.by_ref().collect();
    assert!(matches!(results.last(), Some(Err(TraceError::Corrupt { .. }))), "{:?}", results.last());
    assert!(r.next().is_none());
    let mut flipped = gz.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x55;
    flipped[mid + 1] ^= 0xaa;
    let r = TraceReader::from_reader(Cursor::new(flipped), TraceOptions::new(TraceFormat::Alibaba)).unwrap();
    let mut saw_error = false;
    for item in r {
        match item {
            Ok(_) => {}
            Err(TraceError::Corrupt { .. }) => saw_error = true,
            Err(e) => panic!("expected corruption, got {e}"),
        }
    }
    // A flipped byte breaks the deflate stream or its CRC; either way it is reported as corruption.
    assert!(saw_error);
}

#[test]
fn io_errors_stay_io_errors() {
    struct Failing(usize);
    impl std::io::Read for Failing {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.0 == 0 {
                return Err(std::io::Error::other("disk on fire"));
            }
            let line = b"1,W,0,4096,1\n";
            let n = line.len().min(buf.len());
            buf[..n].copy_from_slice(&line[..n]);
            self.0 -= 1;
            Ok(n)
        }
    }
    let r = TraceReader::from_reader(Failing(3), TraceOptions::new(TraceFormat::Alibaba)).unwrap();
    let results: Vec<_> = r.collect();
    assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 3);
    assert!(matches!(results.last(), Some(Err(TraceError::Io(_)))));
}

/// Arbitrary bytes, plain and gzip-wrapped, in both modes: never a panic, and every op is a valid range.
#[test]
fn random_input_never_panics() {
    for_each_seed(|seed| {
        let mut rng = Rng::new(seed);
        let alphabet = b"0123456789,RWrw\n\r -.ReadWrite\xff\x00hm_";
        for _ in 0..300 {
            let len = rng.below(400) as usize;
            let data: Vec<u8> = (0..len)
                .map(|_| {
                    if rng.chance(0.9) {
                        alphabet[rng.below(alphabet.len() as u64) as usize]
                    } else {
                        rng.next_u64() as u8
                    }
                })
                .collect();
            for format in TraceFormat::ALL {
                for strict in [false, true] {
                    for input in [data.clone(), gzip(&data)] {
                        let mut opts = TraceOptions::new(format);
                        opts.strict = strict;
                        opts.block_size = 1 + rng.below(8192);
                        let r = TraceReader::from_reader(Cursor::new(input), opts).unwrap();
                        for op in r.flatten() {
                            assert!(op.first_block <= op.last_block);
                        }
                    }
                }
            }
        }
    });
}

#[test]
fn open_reads_files_and_reports_missing_ones() {
    let dir = std::env::temp_dir().join(format!("rangedb-workloads-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("t.csv.gz");
    std::fs::write(&path, gzip(ALIBABA)).unwrap();
    let r = TraceReader::open(&path, TraceOptions::new(TraceFormat::Alibaba)).unwrap();
    assert_eq!(r.collect::<Result<Vec<_>, _>>().unwrap().len(), 4);
    let missing = TraceReader::open(&dir.join("missing"), TraceOptions::new(TraceFormat::Alibaba));
    assert!(matches!(missing, Err(TraceError::Io(_))));
    std::fs::remove_dir_all(&dir).unwrap();
}
