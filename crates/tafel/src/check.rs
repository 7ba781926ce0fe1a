//! `tafel check`: verifies a whole embedded store offline, changing nothing,
//! and lists what is damaged (`tafel_store::embedded::check`).

use std::path::PathBuf;

use crate::progress::Progress;
use anyhow::{bail, Context as _};

#[derive(clap::Args)]
pub struct CheckArgs {
    /// The embedded store's data directory (no server may have it open).
    #[arg(long, env = "TAFEL_DATA_DIR", default_value = "./tafel-data")]
    data_dir: PathBuf,
    /// No progress, only the findings.
    #[arg(long, short)]
    quiet: bool,
}

/// Exit status 0: nothing damaged; 1 (an error): damage found, or no check made.
pub fn run(a: CheckArgs) -> anyhow::Result<()> {
    let progress = Progress::new("check", None, a.quiet);
    let mut seen = 0;
    let encoder = tafel_service::index::encoder();
    let report = tafel_store::embedded::check_with(&a.data_dir, Some(&encoder), &mut |n| {
        progress.add(n - seen, 0);
        seen = n;
    })
    .with_context(|| format!("checking {}", a.data_dir.display()))?;
    progress.finish("");
    for w in &report.warnings {
        eprintln!("warning: {w}");
    }
    for d in &report.damage {
        println!("damaged: {d}");
    }
    let checksums = match report.checksums {
        true => "every value's checksum",
        false => "redb's page checksums only (values get their own at the server's next start)",
    };
    eprintln!(
        "{}: {} tables, {} entities ({} bytes), {} index entries, {} log records replayed in memory; checked \
         {checksums} and every index against its table",
        a.data_dir.display(),
        report.tables,
        report.entities,
        report.bytes,
        report.index_entries,
        report.replayed,
    );
    if !report.damage.is_empty() {
        bail!(
            "{} damaged: restore from a backup (`tafel restore`), or export what reads",
            match report.damage.len() {
                1 => "1 thing is".to_owned(),
                n => format!("{n} things are"),
            }
        );
    }
    eprintln!("no damage found");
    Ok(())
}
