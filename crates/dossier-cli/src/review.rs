//! `dossier review`: the queue of candidates the engine will not decide on its own.

use std::process::ExitCode;

use anyhow::Result;
use clap::Subcommand;
use dossier_core::review::{Subject, Verdict};
use dossier_engine::review::ReviewItem;
use dossier_engine::Engine;

#[derive(Subcommand)]
pub enum ReviewAction {
    /// Candidates awaiting a decision (with --all, decided ones too).
    List {
        /// Only this tenant's candidates.
        #[arg(long)]
        tenant: Option<String>,
        /// Include approved and rejected candidates.
        #[arg(long)]
        all: bool,
    },
    /// One candidate with the source text that supports it.
    Show { id: String },
    /// Approve: a supersession deprecates the older version from the newer's start; a
    /// merge joins the two names into one entity.
    Approve {
        id: String,
        #[command(flatten)]
        decision: DecisionArgs,
    },
    /// Reject: look-alike documents are recorded as different documents (no longer a
    /// conflict); names stay apart.
    Reject {
        id: String,
        #[command(flatten)]
        decision: DecisionArgs,
    },
}

#[derive(clap::Args)]
pub struct DecisionArgs {
    /// Who decides (recorded with the decision).
    #[arg(long, env = "DOSSIER_REVIEWER")]
    by: String,
    /// Why (recorded with the decision).
    #[arg(long, default_value = "")]
    note: String,
}

pub fn run(engine: &Engine, action: &ReviewAction, json: bool) -> Result<ExitCode> {
    match action {
        ReviewAction::List { tenant, all } => {
            let items = engine.review_list(tenant.as_deref(), *all)?;
            if json {
                crate::print_json(&serde_json::json!({ "candidates": items }))?;
            } else if items.is_empty() {
                println!("the review queue is empty");
            } else {
                for i in &items {
                    println!(
                        "{}  {:<8} {:<9} {}",
                        i.id,
                        i.tenant,
                        status(i),
                        i.subject.describe()
                    );
                }
                println!(
                    "({} candidates; `dossier review show ID` for the sources)",
                    items.len()
                );
            }
        }
        ReviewAction::Show { id } => {
            let item = engine.review_show(id)?;
            if json {
                crate::print_json(&item)?;
            } else {
                print_item(&item);
            }
        }
        ReviewAction::Approve { id, decision } | ReviewAction::Reject { id, decision } => {
            let verdict = if matches!(action, ReviewAction::Approve { .. }) {
                Verdict::Approved
            } else {
                Verdict::Rejected
            };
            let d = engine.review_decide(id, verdict, &decision.by, &decision.note)?;
            if json {
                crate::print_json(&d)?;
            } else {
                let what = match (&d.subject, verdict) {
                    (Subject::Supersession { newer, older }, Verdict::Approved) => {
                        format!("{newer} now supersedes {older}")
                    }
                    (Subject::Supersession { newer, older }, Verdict::Rejected) => {
                        format!("{newer} and {older} are recorded as different documents")
                    }
                    (Subject::Merge { alias, canonical }, Verdict::Approved) => {
                        format!("{alias} is now an alias of {canonical}")
                    }
                    (Subject::Merge { alias, canonical }, Verdict::Rejected) => {
                        format!("{alias} and {canonical} stay apart")
                    }
                    (s, _) => s.describe(),
                };
                println!("{} {:?} by {}: {what}", d.id, verdict, d.by);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn status(i: &ReviewItem) -> String {
    serde_json::to_value(i.status)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn print_item(i: &ReviewItem) {
    println!("{}  [{}]  tenant {}", i.id, status(i), i.tenant);
    println!("  {}", i.subject.describe());
    println!("  why: {}", i.reason);
    if let Some(d) = &i.decision {
        println!(
            "  decided: {:?} by {} at {} — {}",
            d.verdict, d.by, d.at, d.note
        );
    }
    for e in &i.evidence {
        let at = e.chunk_id.as_deref().unwrap_or("(document)");
        println!(
            "  ── {}@{} [{}] {} — {}",
            e.doc_id, e.version, e.status, at, e.title
        );
        for line in e.text.lines().filter(|l| !l.trim().is_empty()) {
            println!("     {line}");
        }
    }
}
