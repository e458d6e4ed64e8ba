//! What `kv exec` needs of an engine: the [`KvEngine`] trait, the updates it applies and the errors it answers
//! with. Each engine's adapter (`lsm_engine.rs`, `flexdb.rs`) implements it.

/// A failure answered as `ERR <kind> <message>`.
#[derive(Debug)]
pub struct KvError {
    pub(crate) kind: &'static str,
    pub(crate) msg: String,
}

impl std::fmt::Display for KvError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.kind, self.msg)
    }
}

/// The message of an `ERR <kind> <message>` line: on one line, and without the engines' own "invalid argument: "
/// prefix, which would repeat the kind (`ERR invalid invalid argument: ...`).
pub fn err_message(kind: &str, text: &str) -> String {
    let text = match kind {
        "invalid" => text.strip_prefix("invalid argument: ").unwrap_or(text),
        // "corruption in FILE: ..." reads "ERR corruption in FILE: ...".
        "corruption" => text.strip_prefix("corruption ").unwrap_or(text),
        "io" => text.strip_prefix("I/O error: ").or_else(|| text.strip_prefix("i/o error: ")).unwrap_or(text),
        _ => text,
    };
    text.replace('\n', " ")
}

impl KvError {
    /// An error answered as `ERR <kind> <msg>`.
    pub fn new(kind: &'static str, msg: impl Into<String>) -> Self {
        KvError { kind, msg: err_message(kind, &msg.into()) }
    }

    pub(crate) fn parse(msg: impl Into<String>) -> Self {
        KvError { kind: "parse", msg: msg.into() }
    }
}

impl From<lsm::Error> for KvError {
    fn from(e: lsm::Error) -> Self {
        let kind = match &e {
            lsm::Error::Background(inner) => match inner.kind() {
                "corruption" => "corruption",
                _ => "io",
            },
            e => e.kind(),
        };
        KvError { kind, msg: err_message(kind, &e.to_string()) }
    }
}

/// The result of an engine call in a session.
pub type KvResult<T> = Result<T, KvError>;

/// One update of a batch.
#[derive(Debug, Clone)]
pub enum Update {
    /// `put K V`.
    Put(Vec<u8>, Vec<u8>),
    /// `del K`.
    Del(Vec<u8>),
    /// `delrange A B`.
    DelRange(Vec<u8>, Vec<u8>),
}

/// What `kv exec` needs of an engine.
pub trait KvEngine {
    /// Applies updates atomically.
    fn write(&mut self, ups: Vec<Update>, sync: bool) -> KvResult<()>;
    /// Reads a key, at snapshot `snap` if given.
    fn get(&mut self, k: &[u8], snap: Option<u64>) -> KvResult<Option<Vec<u8>>>;
    /// Live pairs in `[a, b)`, up to `limit`, ascending or descending.
    fn scan(
        &mut self,
        a: &[u8],
        b: &[u8],
        limit: usize,
        rev: bool,
        snap: Option<u64>,
    ) -> KvResult<Vec<(Vec<u8>, Vec<u8>)>>;
    /// Takes a snapshot; returns its id.
    fn snapshot(&mut self) -> KvResult<u64>;
    /// Releases a snapshot.
    fn release(&mut self, id: u64) -> KvResult<()>;
    /// Flushes the memtable to disk.
    fn flush(&mut self) -> KvResult<()>;
    /// Makes every acknowledged write durable.
    fn sync(&mut self) -> KvResult<()>;
    /// Compacts `[a, b]` or everything.
    fn compact(&mut self, range: Option<(Vec<u8>, Vec<u8>)>) -> KvResult<()>;
    /// Counters as one JSON line.
    fn stats(&mut self) -> KvResult<String>;
    /// Closes cleanly.
    fn close(self: Box<Self>) -> KvResult<()>;
}

/// Tells the operator on standard error what a point-in-time open dropped (`salvaged`: the corruption a strict
/// open reports; `dropped`: bytes of log not replayed).
pub(crate) fn report_salvage(salvaged: Option<&str>, dropped: u64) {
    if let Some(why) = salvaged {
        eprintln!("rangedb: point-in-time recovery dropped {dropped} bytes of log from the damage on: {why}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_messages_do_not_repeat_their_kind() {
        let e = KvError::new("invalid", "invalid argument: memtable_bytes must be at least 1 KiB\nreally");
        assert_eq!(e.to_string(), "invalid memtable_bytes must be at least 1 KiB really");
        // Only the kind's own prefix goes.
        assert_eq!(err_message("io", "invalid argument: x"), "invalid argument: x");
        assert_eq!(
            err_message("corruption", "corruption in 000007.log: at offset 9"),
            "in 000007.log: at offset 9"
        );
        // Both engines' spellings of the I/O prefix (`ERR io I/O error: ...` repeated the kind).
        assert_eq!(err_message("io", "I/O error: File exists (os error 17)"), "File exists (os error 17)");
        assert_eq!(err_message("io", "i/o error: Not a directory"), "Not a directory");
    }
}
