//! The files of a lab run: `results.json`, `rows.csv`, `results.md` (the tables for
//! BENCHMARKS.md), `series.csv` for open-model rows, and `report.html`. It writes what the other
//! modules render; it measures and renders nothing itself.

use std::path::Path;

use crate::error::LabError;
use crate::results::ExperimentResults;

impl ExperimentResults {
    /// Writes `results.json`, `rows.csv`, `results.md` (the tables for BENCHMARKS.md) and
    /// (open-model rows) `series.csv` into `dir`.
    pub fn write(&self, dir: &Path) -> Result<(), LabError> {
        std::fs::create_dir_all(dir).map_err(|e| LabError::io(dir, e))?;
        let write = |name: &str, bytes: &[u8]| {
            let path = dir.join(name);
            std::fs::write(&path, bytes).map_err(|e| LabError::io(path, e))
        };
        write("results.json", &serde_json::to_vec_pretty(self)?)?;
        write("rows.csv", self.rows_csv().as_bytes())?;
        write("results.md", crate::markdown::markdown(self).as_bytes())?;
        if self.rows.iter().any(|r| r.load().is_some_and(|l| l.settings.model == "open")) {
            write("series.csv", self.series_csv().as_bytes())?;
        }
        Ok(())
    }
}

/// Writes `report.html` for `runs` at `path`.
pub fn write_report(path: &Path, runs: &[ExperimentResults]) -> Result<(), LabError> {
    std::fs::write(path, crate::report::render(runs)).map_err(|e| LabError::io(path, e))
}

/// Writes one experiment's files and its `report.html` into `dir`.
pub fn write_run(dir: &Path, results: &ExperimentResults) -> Result<(), LabError> {
    results.write(dir)?;
    write_report(&dir.join("report.html"), std::slice::from_ref(results))
}
