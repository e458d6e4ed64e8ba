//! File names inside a database directory.
//!
//! `NNNNNN.log` write-ahead logs, `NNNNNN.sst` tables, `MANIFEST-NNNNNN` version-edit logs, `CURRENT` (the name of
//! the live MANIFEST), `LOCK`. All numbers come from one counter, so a number names exactly one file ever.

/// A file of the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// Write-ahead log.
    Log(u64),
    /// Sorted table.
    Table(u64),
    /// MANIFEST.
    Manifest(u64),
    /// CURRENT.
    Current,
    /// LOCK.
    Lock,
    /// A `*.tmp` left by an interrupted atomic write.
    Temp,
}

/// The name of WAL `n`.
pub fn log_name(n: u64) -> String {
    format!("{n:06}.log")
}

/// The name of table `n`.
pub fn table_name(n: u64) -> String {
    format!("{n:06}.sst")
}

/// The name of MANIFEST `n`.
pub fn manifest_name(n: u64) -> String {
    format!("MANIFEST-{n:06}")
}

/// Classifies a directory entry; `None` for files that are not ours.
pub fn parse(name: &str) -> Option<FileKind> {
    if name == "CURRENT" {
        return Some(FileKind::Current);
    }
    if name == "LOCK" {
        return Some(FileKind::Lock);
    }
    if name.ends_with(".tmp") {
        return Some(FileKind::Temp);
    }
    if let Some(n) = name.strip_prefix("MANIFEST-") {
        return n.parse().ok().map(FileKind::Manifest);
    }
    if let Some(n) = name.strip_suffix(".log") {
        return n.parse().ok().map(FileKind::Log);
    }
    if let Some(n) = name.strip_suffix(".sst") {
        return n.parse().ok().map(FileKind::Table);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_roundtrip() {
        assert_eq!(parse(&log_name(7)), Some(FileKind::Log(7)));
        assert_eq!(parse(&table_name(123456789)), Some(FileKind::Table(123456789)));
        assert_eq!(parse(&manifest_name(3)), Some(FileKind::Manifest(3)));
        assert_eq!(parse("CURRENT"), Some(FileKind::Current));
        assert_eq!(parse("CURRENT.tmp"), Some(FileKind::Temp));
        assert_eq!(parse("x.sst.bak"), None);
    }
}
