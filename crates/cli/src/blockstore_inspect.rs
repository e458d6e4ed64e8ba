//! `rangedb inspect blockstore DIR`: the volumes of a block store, their index, data files and journal.
//!
//! Volumes are opened read-only (recovery runs in memory; nothing on disk changes); a volume a server has open
//! is refused as in use (its lock file), since its files change under the reader. `--action check` also reads and verifies every compression unit the index
//! references and exits non-zero on the first bad one.

use std::path::Path;
use std::sync::Arc;

use blockstore::{BLOCK_SIZE, Options, Store};

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

fn mib(b: u64) -> String {
    format!("{:.2} MiB", b as f64 / (1u64 << 20) as f64)
}

/// Prints every volume of the store at `dir` (`dump`), or also verifies their data (`check`).
pub fn run(dir: &Path, action: &str) -> Res<()> {
    if !matches!(action, "dump" | "check") {
        return Err(format!("blockstore supports --action dump or check, not {action}").into());
    }
    let store = Store::open_existing(Arc::new(vfs::OsFs::new()), dir, Options::default())?;
    let names = store.list()?;
    println!("store {}: {} volume(s)", dir.display(), names.len());
    for name in names {
        let v = store.volume_read_only(&name)?;
        let i = v.info()?;
        println!("volume {name}: {} bytes ({} blocks of {BLOCK_SIZE})", i.size, i.size / BLOCK_SIZE as u64);
        println!(
            "  index: {} live pieces, {} entries, {} leaves, {} bytes of memory ({:.2} bytes per mapped GiB)",
            i.index_pieces,
            i.index_entries,
            i.index_leaves,
            i.index_memory,
            {
                let mapped: u64 = i.data_files.iter().map(|f| f.live_blocks).sum();
                let gib = (mapped * BLOCK_SIZE as u64) as f64 / (1u64 << 30) as f64;
                if gib > 0.0 { i.index_memory as f64 / gib } else { 0.0 }
            }
        );
        let cp = if i.checkpoint_seq == 0 {
            "none".to_string()
        } else {
            format!("after batch {}", i.checkpoint_seq)
        };
        println!(
            "  checkpoint: {cp}; recovery replayed {} batch(es), {} journal record(s)",
            i.stats.recovered_batches, i.stats.recovered_journal_records
        );
        let m = i.synced;
        if m.batch_seq == 0 {
            println!("  synced: no mark (nothing past the checkpoint is known durable)");
        } else {
            println!(
                "  synced: batches up to {} durable (data-{:08}.dat up to {} bytes)",
                m.batch_seq, m.file, m.len
            );
        }
        println!(
            "  journal: {} bytes, {} record(s); segment cache {} bytes",
            i.journal_bytes, i.journal_records, i.cache_bytes
        );
        let total: u64 = i.data_files.iter().map(|f| f.bytes).sum();
        let live: u64 = i.data_files.iter().map(|f| f.live_blocks).sum();
        let written: u64 = i.data_files.iter().map(|f| f.written_blocks).sum();
        println!(
            "  data files: {} holding {}; {} of {} written blocks live ({:.1}%)",
            i.data_files.len(),
            mib(total),
            live,
            written,
            if written > 0 { 100.0 * live as f64 / written as f64 } else { 100.0 }
        );
        for f in &i.data_files {
            let ratio = if f.written_blocks > 0 {
                100.0 * f.live_blocks as f64 / f.written_blocks as f64
            } else {
                0.0
            };
            println!(
                "    data-{:08}.dat {:>12} bytes {:>10} written {:>10} live {:>6.1}% {}",
                f.id,
                f.bytes,
                f.written_blocks,
                f.live_blocks,
                ratio,
                if f.sealed { "sealed" } else { "current" }
            );
        }
        if action == "check" {
            let units = v.verify()?;
            v.check_invariants().map_err(|e| format!("volume {name}: {e}"))?;
            println!("  check: {units} unit(s) verified, index consistent");
        }
    }
    Ok(())
}
