//! `rangedb kv exec`: scripting a key-value engine over standard input (shared/specs/kv-shell.md).
//!
//! Engines plug in through [`KvEngine`](crate::kv_engine::KvEngine) (`kv_engine.rs`); `--engine lsm` is the
//! leveled LSM engine and `--engine flexdb` FlexDB, each with its options as flags (`kv_args.rs`). The session
//! loop is `kv_session.rs`.

use std::process::ExitCode;

use crate::kv_args::ExecArgs;
use crate::kv_session::session;
use crate::lsm_engine::open_lsm;

/// Arguments of `rangedb kv`.
#[derive(Debug, clap::Args)]
pub struct KvArgs {
    #[command(subcommand)]
    command: KvCommand,
}

#[derive(Debug, clap::Subcommand)]
enum KvCommand {
    /// Open a database and run commands from standard input.
    Exec(ExecArgs),
}

/// The `--wal-recovery` mode called `name`.
fn wal_recovery(name: &str) -> Result<vfs::torn::WalRecovery, String> {
    vfs::torn::WalRecovery::from_name(name).ok_or_else(|| {
        let names: Vec<&str> = vfs::torn::WalRecovery::NAMED.iter().map(|(n, _)| *n).collect();
        format!("unknown --wal-recovery {name:?} ({})", names.join(" | "))
    })
}

/// Runs `rangedb kv`.
pub fn run(args: KvArgs) -> Result<ExitCode, Box<dyn std::error::Error + Send + Sync>> {
    let KvCommand::Exec(a) = args.command;
    a.check_engine_flags()?;
    let recovery = wal_recovery(&a.wal_recovery)?;
    crate::dirs::absent_or_dir(&a.dir)?;
    let mut engine = match a.engine.as_str() {
        "lsm" => open_lsm(&a, recovery).map_err(|e| format!("{} {}", e.kind, e.msg))?,
        "flexdb" => {
            crate::flexdb::open_engine(&a.dir, a.create, &a.flexdb, recovery).map_err(|e| e.to_string())?
        }
        other => return Err(format!("unknown engine {other} (known: lsm, flexdb)").into()),
    };
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    session(&mut *engine, a.sync, &mut stdin.lock(), &mut stdout.lock())?;
    engine.close().map_err(|e| format!("{} {}", e.kind, e.msg))?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_runs_the_spec_commands() {
        let dir = tempfile::tempdir().unwrap();
        let a = ExecArgs {
            engine: "lsm".into(),
            dir: dir.path().join("db"),
            create: true,
            sync: false,
            write_buffer_size: Some(4096),
            max_write_buffer_number: None,
            level0_file_num_compaction_trigger: None,
            level0_slowdown_writes_trigger: None,
            level0_stop_writes_trigger: None,
            max_bytes_for_level_base: None,
            max_bytes_for_level_multiplier: None,
            target_file_size_base: None,
            block_size: None,
            bloom_bits_per_key: None,
            compression: None,
            block_cache_size: None,
            range_delete_strategy: None,
            range_reduce: None,
            disable_auto_compactions: false,
            wal_recovery: "strict".into(),
            flexdb: Default::default(),
        };
        let mut e = open_lsm(&a, vfs::torn::WalRecovery::Strict).map_err(|e| e.msg).unwrap();
        let script = "put a 1\nput b 2\nsnapshot\ndelrange a b\nget a\nget a @1\nbatch 2\nput c 3\ndel b\n\
                      scan a z\nrscan a z 1\nflush\ncompact\nsync\nbogus\nget 0x\nrelease 1\nget a @1\n";
        let mut out = Vec::new();
        session(&mut *e, false, &mut script.as_bytes(), &mut out).unwrap();
        let out = String::from_utf8(out).unwrap();
        let want = "OK\nOK\nSNAPSHOT 1\nOK\nNOT_FOUND\n1\nOK\nc 3\nEND 1\nc 3\nEND 1\nOK\nOK\nOK\n";
        assert!(out.starts_with(want), "{out}");
        assert!(out.contains("ERR parse unknown command bogus"), "{out}");
        assert!(out.ends_with("NOT_FOUND\nOK\nERR invalid no snapshot 1\n"), "{out}");
        e.close().map_err(|e| e.msg).unwrap();
    }
}
