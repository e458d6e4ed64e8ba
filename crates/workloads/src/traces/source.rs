//! One iterator over a trace file or a synthetic trace, so replay code is the same for both
//! (`rangedb rask replay --format alibaba|tencent|msr|synthetic`).

use std::path::Path;

use super::block_op::BlockOp;
use super::error::TraceError;
use super::reader::{ReadStats, TraceOptions, TraceReader};
use super::synthetic::{SyntheticOptions, SyntheticTrace};
use super::volumes::Volumes;

/// Where block operations come from.
#[derive(Debug)]
pub enum TraceSource {
    /// A trace file in a public format.
    File(Box<TraceReader>),
    /// The synthetic generator; `only` restricts it to one volume id.
    Synthetic {
        /// The generator.
        trace: Box<SyntheticTrace>,
        /// Its volume names (`0`, `1`, ...).
        volumes: Volumes,
        /// Only this volume's operations, if set.
        only: Option<u32>,
    },
}

impl TraceSource {
    /// A trace file (plain or gzip).
    pub fn open(path: &Path, opts: TraceOptions) -> Result<TraceSource, TraceError> {
        Ok(TraceSource::File(Box::new(TraceReader::open(path, opts)?)))
    }

    /// A synthetic trace; `volume` keeps only the volume with that name (`"0"`, `"1"`, ...).
    pub fn synthetic(opts: SyntheticOptions, volume: Option<&str>) -> Result<TraceSource, TraceError> {
        let volumes = opts.volume_names();
        let only = match volume {
            None => None,
            Some(name) => Some(volumes.id(name).ok_or_else(|| {
                TraceError::InvalidArgument(format!("the synthetic trace has no volume `{name}`"))
            })?),
        };
        // The message alone: `TraceError::InvalidArgument` names the kind already ("invalid argument: invalid ...").
        let trace =
            SyntheticTrace::new(opts).map_err(|e| TraceError::InvalidArgument(e.message().to_string()))?;
        Ok(TraceSource::Synthetic { trace: Box::new(trace), volumes, only })
    }

    /// Names of the volumes seen so far (a file's grow as it is read; a synthetic trace's are all known).
    pub fn volumes(&self) -> &Volumes {
        match self {
            TraceSource::File(r) => r.volumes(),
            TraceSource::Synthetic { volumes, .. } => volumes,
        }
    }

    /// A file's parse counters (malformed lines and their numbers); `None` for a synthetic trace.
    pub fn read_stats(&self) -> Option<&ReadStats> {
        match self {
            TraceSource::File(r) => Some(r.stats()),
            TraceSource::Synthetic { .. } => None,
        }
    }
}

impl Iterator for TraceSource {
    type Item = Result<BlockOp, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            TraceSource::File(r) => r.next(),
            TraceSource::Synthetic { trace, only, .. } => match *only {
                None => trace.next().map(Ok),
                Some(v) => trace.find(|op| op.volume == v).map(Ok),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Printed "invalid argument: invalid argument: at least one volume".
    #[test]
    fn regression_a_bad_synthetic_option_names_its_kind_once() {
        let opts = SyntheticOptions { volumes: 0, ..SyntheticOptions::default() };
        let Err(e) = TraceSource::synthetic(opts, None) else { panic!("zero volumes accepted") };
        assert_eq!(e.to_string(), "invalid argument: at least one volume");
    }
}
