//! `fleetctl analyze`: detection run again, with the thresholds its flags give (one
//! flag per settable threshold of `analyze::THRESHOLDS`); and `fleetctl migrate`,
//! the same run on a database of an earlier schema, brought up to date first.

use super::*;
use crate::error::Result;
use crate::render;
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub(super) struct AnalyzeArgs {
    #[command(flatten)]
    thresholds: ThresholdFlags,

    /// PostgreSQL only: analyse shard I of N (the vehicles a stable hash of their id
    /// puts there), so that N machines analyse one fleet at once; e.g. --shard 1/2 on
    /// one and --shard 2/2 on another. Each vehicle is analysed under a lock of its
    /// own, so overlapping runs wait rather than clash.
    #[arg(long, value_name = "I/N", value_parser = parse_shard)]
    shard: Option<(u32, u32)>,
}

/// `I/N` with 1 ≤ I ≤ N.
fn parse_shard(text: &str) -> std::result::Result<(u32, u32), String> {
    let parsed = text
        .split_once('/')
        .and_then(|(i, n)| Some((i.trim().parse::<u32>().ok()?, n.trim().parse::<u32>().ok()?)));
    match parsed {
        Some((i, n)) if (1..=n).contains(&i) => Ok((i, n)),
        _ => Err(format!(
            "{text:?} is not a shard: give I/N with 1 ≤ I ≤ N, e.g. 1/2"
        )),
    }
}

/// The `analyze` flags: one per threshold of `analyze::THRESHOLDS` that has a flag,
/// with its help, unit and default from there; each value given, as stored.
#[derive(Clone, Default)]
pub(super) struct ThresholdFlags(Vec<(&'static crate::analyze::ThresholdSpec, f64)>);

impl std::fmt::Debug for ThresholdFlags {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.0.iter().map(|(spec, value)| (spec.key, value)))
            .finish()
    }
}

impl clap::FromArgMatches for ThresholdFlags {
    fn from_arg_matches(matches: &clap::ArgMatches) -> std::result::Result<Self, clap::Error> {
        let given = crate::analyze::THRESHOLDS
            .iter()
            .filter_map(|spec| {
                let flag = spec.flag.as_ref()?;
                let value = matches.get_one::<f64>(flag.name)?;
                Some((spec, value * flag.stored_per_unit))
            })
            .collect();
        Ok(ThresholdFlags(given))
    }

    fn update_from_arg_matches(
        &mut self,
        matches: &clap::ArgMatches,
    ) -> std::result::Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

impl clap::Args for ThresholdFlags {
    fn augment_args(mut cmd: clap::Command) -> clap::Command {
        let defaults = crate::analyze::Thresholds::default();
        for spec in &crate::analyze::THRESHOLDS {
            let Some(flag) = &spec.flag else { continue };
            let (lo, hi) = flag.range;
            let default = (spec.get)(&defaults) / flag.stored_per_unit;
            cmd = cmd.arg(
                clap::Arg::new(flag.name)
                    .long(flag.name)
                    .value_name(flag.value_name)
                    .value_parser(clap::value_parser!(f64))
                    .help(format!("{} (default {default}; {lo}–{hi})", spec.meaning)),
            );
        }
        cmd
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

pub(super) fn analyze(db: crate::store::Location, args: AnalyzeArgs) -> Result<()> {
    let adjust = |t: &mut crate::analyze::Thresholds| {
        for (spec, value) in &args.thresholds.0 {
            (spec.set)(t, *value);
        }
    };
    let path = match db {
        crate::store::Location::File(path) => path,
        crate::store::Location::Postgres(target) => {
            let mut bar = ProgressBar::new("analysing");
            let summary = crate::pipeline::reanalyze_postgres(
                &target,
                &adjust,
                args.shard.unwrap_or((1, 1)),
                &mut |f| bar.set(f),
            );
            bar.finish();
            let shown = PathBuf::from(target.display());
            return print_stdout(&render::analyze_summary(&shown, &summary?));
        }
    };
    if let Some((i, n)) = args.shard {
        return Err(crate::error::Error::invalid(format!(
            "--shard {i}/{n}: a SQLite file is analysed by one process at a time"
        ))
        .with_hint("leave --shard out, or keep the fleet on PostgreSQL (--db postgres://…) to analyse it on several machines"));
    }
    let mut bar = ProgressBar::new("analysing");
    let summary = crate::pipeline::reanalyze(&path, &adjust, &mut |f| bar.set(f));
    bar.finish();
    let summary = summary?;
    print_stdout(&render::analyze_summary(&path, &summary))
}

pub(super) fn migrate(path: PathBuf) -> Result<()> {
    use crate::store::{Probe, SCHEMA_VERSION, is_upgradable};
    let from = match crate::store::probe(&path)? {
        Probe::Fleet { schema_version } if schema_version == SCHEMA_VERSION => {
            return print_stdout(&match crate::store::add_revision(&path)? {
                true => format!(
                    "{}: schema version {schema_version}; added the revision counter a server reads \
                     instead of the vehicles, geofences, places and meta at every change\n",
                    path.display()
                ),
                false => format!(
                    "{} is at schema version {schema_version} already; nothing to do\n",
                    path.display()
                ),
            });
        }
        Probe::Fleet { schema_version } if is_upgradable(schema_version) => schema_version,
        // Missing, not ours, or of a version this fleetctl cannot bring up to date:
        // the refusal (and advice) every command gives.
        _ => return crate::store::open_read_only(&path).map(drop),
    };
    let bytes = || std::fs::metadata(&path).map_or(0, |m| m.len());
    let before = bytes();
    let mut bar = ProgressBar::new("migrating");
    let summary = crate::pipeline::reanalyze(&path, &|_| {}, &mut |f| bar.set(f));
    bar.finish();
    let summary = summary?;
    print_stdout(&format!(
        "{}: schema version {from} → {}; {} positions of {} vehicles kept and analysed again; {:.1} MB → {:.1} MB\n",
        path.display(),
        SCHEMA_VERSION,
        summary.fixes,
        summary.vehicles,
        before as f64 / 1e6,
        bytes() as f64 / 1e6
    ))
}
