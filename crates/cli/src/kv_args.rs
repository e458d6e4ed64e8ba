//! The flags of `rangedb kv exec`, and the check that refuses flags of the engine not chosen.

use std::path::PathBuf;

/// Arguments of `rangedb kv exec`.
#[derive(Debug, clap::Args)]
pub struct ExecArgs {
    /// The engine: `lsm` or `flexdb`.
    #[arg(long)]
    pub(crate) engine: String,
    /// The database directory.
    #[arg(long)]
    pub(crate) dir: PathBuf,
    /// Create the database if the directory holds none.
    #[arg(long)]
    pub(crate) create: bool,
    /// Make every write durable before answering OK.
    #[arg(long)]
    pub(crate) sync: bool,
    /// lsm: memtable size in bytes.
    #[arg(long)]
    pub(crate) write_buffer_size: Option<usize>,
    /// lsm: memtables in memory (mutable + immutable).
    #[arg(long)]
    pub(crate) max_write_buffer_number: Option<usize>,
    /// lsm: L0 files that trigger compaction.
    #[arg(long)]
    pub(crate) level0_file_num_compaction_trigger: Option<usize>,
    /// lsm: L0 files that delay writes.
    #[arg(long)]
    pub(crate) level0_slowdown_writes_trigger: Option<usize>,
    /// lsm: L0 files that stop writes.
    #[arg(long)]
    pub(crate) level0_stop_writes_trigger: Option<usize>,
    /// lsm: target size of L1 in bytes.
    #[arg(long)]
    pub(crate) max_bytes_for_level_base: Option<u64>,
    /// lsm: size ratio between levels.
    #[arg(long)]
    pub(crate) max_bytes_for_level_multiplier: Option<u64>,
    /// lsm: compaction output file size in bytes.
    #[arg(long)]
    pub(crate) target_file_size_base: Option<u64>,
    /// lsm: data block size in bytes.
    #[arg(long)]
    pub(crate) block_size: Option<usize>,
    /// lsm: Bloom filter bits per key (0 disables).
    #[arg(long)]
    pub(crate) bloom_bits_per_key: Option<usize>,
    /// lsm: block compression, `none`, `lz4` or `zstd`.
    #[arg(long)]
    pub(crate) compression: Option<String>,
    /// lsm: block cache bytes.
    #[arg(long)]
    pub(crate) block_cache_size: Option<usize>,
    /// lsm: range-delete strategy, `local` (range tombstones in the tables, the default) or `global` (GLORAN's
    /// global index). A database keeps the strategy it was created with.
    #[arg(long)]
    pub(crate) range_delete_strategy: Option<String>,
    /// lsm: RangeReduce mode (query-driven compactions): `bounded-merge` (the default), `mos-blind`,
    /// `mos-file-size-aware` or `off`.
    #[arg(long)]
    pub(crate) range_reduce: Option<String>,
    /// lsm: disable automatic compactions.
    #[arg(long)]
    pub(crate) disable_auto_compactions: bool,
    /// What opening does with log damage a crash cannot explain: `strict` (the default: refuse to open, naming
    /// the file and offset) or `point-in-time` (salvage: keep the writes before the damage, drop the rest, and
    /// say on standard error what was dropped).
    #[arg(long, default_value = "strict")]
    pub(crate) wal_recovery: String,
    #[command(flatten)]
    pub(crate) flexdb: crate::flexdb::FlexdbOpts,
}

impl ExecArgs {
    /// The LSM engine's option flags given, as typed on the command line.
    fn lsm_flags_given(&self) -> Vec<&'static str> {
        [
            ("--write-buffer-size", self.write_buffer_size.is_some()),
            ("--max-write-buffer-number", self.max_write_buffer_number.is_some()),
            ("--level0-file-num-compaction-trigger", self.level0_file_num_compaction_trigger.is_some()),
            ("--level0-slowdown-writes-trigger", self.level0_slowdown_writes_trigger.is_some()),
            ("--level0-stop-writes-trigger", self.level0_stop_writes_trigger.is_some()),
            ("--max-bytes-for-level-base", self.max_bytes_for_level_base.is_some()),
            ("--max-bytes-for-level-multiplier", self.max_bytes_for_level_multiplier.is_some()),
            ("--target-file-size-base", self.target_file_size_base.is_some()),
            ("--block-size", self.block_size.is_some()),
            ("--bloom-bits-per-key", self.bloom_bits_per_key.is_some()),
            ("--compression", self.compression.is_some()),
            ("--block-cache-size", self.block_cache_size.is_some()),
            ("--range-delete-strategy", self.range_delete_strategy.is_some()),
            ("--range-reduce", self.range_reduce.is_some()),
            ("--disable-auto-compactions", self.disable_auto_compactions),
        ]
        .into_iter()
        .filter_map(|(flag, set)| set.then_some(flag))
        .collect()
    }

    /// Refuses option flags of the other engine: ignoring them would run with settings the caller did not ask for.
    pub(crate) fn check_engine_flags(&self) -> Result<(), String> {
        let (other, foreign) = match self.engine.as_str() {
            "lsm" => ("flexdb", self.flexdb.given()),
            "flexdb" => ("lsm", self.lsm_flags_given()),
            _ => return Ok(()),
        };
        match foreign.as_slice() {
            [] => Ok(()),
            flags => Err(format!(
                "{} {} only with --engine {other}",
                flags.join(", "),
                if flags.len() == 1 { "applies" } else { "apply" }
            )),
        }
    }
}
