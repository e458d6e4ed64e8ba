//! Checks of a store directory given on the command line, made before an engine opens it: the engines' own
//! errors say "not a directory" or "file exists" without naming the path.

use std::path::Path;

type Res = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// Fails, naming `dir`, unless it is an existing directory (what every inspection reads).
pub fn existing(dir: &Path) -> Res {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(format!("{}: not a directory (a store is a directory)", dir.display()).into()),
        Err(e) => Err(format!("{}: {e}", dir.display()).into()),
    }
}

/// Fails, naming `dir`, if it exists and is not a directory; a missing one is left to the engine, which creates
/// it or refuses to, as `--create` says.
pub fn absent_or_dir(dir: &Path) -> Res {
    match std::fs::metadata(dir) {
        Ok(m) if !m.is_dir() => {
            Err(format!("{}: not a directory (a store is a directory)", dir.display()).into())
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_given_as_a_store_is_refused_with_its_path() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        for r in [existing(&file), absent_or_dir(&file)] {
            let msg = r.unwrap_err().to_string();
            assert!(msg.starts_with(&file.display().to_string()) && msg.contains("not a directory"), "{msg}");
        }
        let missing = d.path().join("missing");
        assert!(existing(&missing).unwrap_err().to_string().starts_with(&missing.display().to_string()));
        assert!(
            absent_or_dir(&missing).is_ok() && existing(d.path()).is_ok() && absent_or_dir(d.path()).is_ok()
        );
    }
}
