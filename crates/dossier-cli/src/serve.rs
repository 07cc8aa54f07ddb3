//! `dossier serve`: the HTTP API and web UI over the store (see the dossier-server crate).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use dossier_engine::Engine;
use dossier_server::{AppState, KeyStore, LimitConfig, ServerConfig};

#[derive(clap::Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    addr: SocketAddr,
    /// API keys (YAML: `- {key_sha256: HEX, principal: ID, admin: false}`, plus
    /// `operator: true` for store-wide operations such as a reindex); re-read when the
    /// file changes or on SIGHUP.
    #[arg(long, env = "DOSSIER_KEYS")]
    keys: PathBuf,
    /// Export spans (request, ask, route, plan, tool, search, rank, write, verify) to
    /// this OpenTelemetry collector over OTLP/HTTP JSON, e.g. `http://127.0.0.1:4318`.
    /// Off when unset.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT")]
    otlp_endpoint: Option<String>,
    /// Sustained requests per second each tenant may send.
    #[arg(long, default_value_t = 50.0)]
    rate: f64,
    /// Requests a tenant may send at once above its sustained rate.
    #[arg(long, default_value_t = 100)]
    burst: u32,
    /// Expensive operations (ask, chat, graph-mode search, jobs) each tenant may run at once.
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// Sustained requests per second of one principal (its own quota, inside its
    /// tenant's rate).
    #[arg(long, default_value_t = 20.0)]
    principal_rate: f64,
    /// Requests one principal may send at once above its sustained rate.
    #[arg(long, default_value_t = 40)]
    principal_burst: u32,
    /// Expensive operations one principal may run at once (inside its tenant's).
    #[arg(long, default_value_t = 4)]
    principal_concurrency: usize,
    /// Deadline of an ask, in milliseconds (past it the answer is partial and says so).
    #[arg(long, default_value_t = 30_000)]
    ask_deadline_ms: u64,
    /// Deadline of a search, in milliseconds (past it: BM25 results marked degraded).
    #[arg(long, default_value_t = 10_000)]
    search_deadline_ms: u64,
    /// The most tool calls one ask may make (a request's `budget.max_steps` is capped
    /// by it).
    #[arg(long, default_value_t = dossier_agent::Budget::default().max_steps)]
    ask_max_steps: usize,
    /// The most evidence chunks one ask may keep.
    #[arg(long, default_value_t = dossier_agent::Budget::default().max_evidence)]
    ask_max_evidence: usize,
    /// The most model tokens (prompt + completion) one ask may use.
    #[arg(long, default_value_t = dossier_agent::Budget::default().max_tokens)]
    ask_max_tokens: u64,
    /// The most planning rounds a model may propose calls in, per ask.
    #[arg(long, default_value_t = dossier_agent::Budget::default().max_planner_calls)]
    ask_max_planner_calls: usize,
    /// Passages a model scores for the reranker, per ask.
    #[arg(long, default_value_t = dossier_agent::Budget::default().max_model_reranks)]
    ask_max_model_reranks: usize,
    /// Sub-questions a model checks for an answer in their evidence, per ask.
    #[arg(long, default_value_t = dossier_agent::Budget::default().max_judge_calls)]
    ask_max_judge_calls: usize,
    /// Answers a model writes per ask (0 or 1).
    #[arg(long, default_value_t = dossier_agent::Budget::default().max_writer_calls,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=1))]
    ask_max_writer_calls: usize,
    /// Translations of the question a model makes per ask (0 or 1).
    #[arg(long, default_value_t = dossier_agent::Budget::default().max_translate_calls,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=1))]
    ask_max_translate_calls: usize,
    /// Search and ask answers kept in the cache (0 turns the cache off).
    #[arg(long, default_value_t = 1024)]
    cache_entries: usize,
    /// Query vectors kept per tenant and principal, so that a repeated query skips the
    /// embedding (0 turns this cache off).
    #[arg(long, default_value_t = dossier_engine::DEFAULT_QUERY_CACHE_CAPACITY)]
    query_vector_entries: usize,
    /// Agent trajectories kept for `GET /v1/traces/{request_id}`.
    #[arg(long, default_value_t = 1000)]
    trace_entries: usize,
    /// Where uploaded documents are kept (default: `uploads/` in the store).
    #[arg(long)]
    uploads: Option<PathBuf>,
    /// Chat model for `ask` and chat completions: `none`, `local` (the llama-server
    /// installed by scripts/setup-llm, started and stopped with the server, with the 1.5B
    /// model when installed, else the 0.5B), `local:0.5b`, `local:1.5b`, or an
    /// OpenAI-compatible base URL (model from --llm-model).
    #[arg(long, default_value = "none", env = "DOSSIER_LLM")]
    llm: String,
    /// Model name sent to an OpenAI-compatible server.
    #[arg(long, default_value = "default", env = "DOSSIER_LLM_MODEL")]
    llm_model: String,
    /// No access log line per request on stderr.
    #[arg(long)]
    quiet: bool,
    /// After SIGTERM or Ctrl-C, how long requests and jobs in flight may finish before
    /// the server stops regardless, in milliseconds.
    #[arg(long, default_value_t = 20_000)]
    drain_ms: u64,
    /// With a shared (PostgreSQL) store: how often to look for commits made by other
    /// replicas or the CLI, in milliseconds.
    #[arg(long, default_value_t = 200)]
    follow_ms: u64,
    /// What the audit log keeps of each question or search query: `digest` (its BLAKE3
    /// only) or `text` (the text as well).
    #[arg(long, default_value = "digest")]
    audit_questions: dossier_server::AuditQuestions,
    /// Audit entries (with the traces kept for `GET /v1/traces/{id}`) older than this
    /// many days are deleted; 0 keeps them forever.
    #[arg(long, default_value_t = dossier_server::DEFAULT_AUDIT_RETENTION_DAYS)]
    audit_retention_days: u32,
    /// At most this many audit entries are kept; older ones are exported, then
    /// deleted. 0: no cap.
    #[arg(long, default_value_t = dossier_server::DEFAULT_AUDIT_MAX_ENTRIES)]
    audit_max_entries: usize,
    /// Where audit entries are written (JSONL) before they are deleted (default:
    /// `audit-export/` in the store).
    #[arg(long)]
    audit_export_dir: Option<PathBuf>,
    /// A request's head must arrive within this many milliseconds of its first byte.
    #[arg(long, default_value_t = 10_000)]
    header_timeout_ms: u64,
    /// A request's body must arrive within this many milliseconds (else 408).
    #[arg(long, default_value_t = 30_000)]
    body_timeout_ms: u64,
    /// A connection with no request running and nothing sent or received for this many
    /// milliseconds is closed.
    #[arg(long, default_value_t = 60_000)]
    idle_timeout_ms: u64,
    /// Open connections in all (lowered at start below the descriptor limit).
    #[arg(long, default_value_t = 10_000)]
    max_connections: usize,
    /// Open connections from one IP address (0: no cap; behind a proxy every client
    /// has the proxy's address).
    #[arg(long, default_value_t = 256)]
    max_connections_per_address: usize,
}

pub fn run(engine: Engine, args: &ServeArgs) -> Result<ExitCode> {
    if let Some(endpoint) = args.otlp_endpoint.as_deref().filter(|e| !e.is_empty()) {
        dossier_server::telemetry::install(endpoint).map_err(anyhow::Error::msg)?;
        eprintln!("dossier-server: exporting spans to {endpoint} (OTLP/HTTP JSON)");
    }
    if args.rate.is_nan() || args.rate <= 0.0 || args.burst == 0 || args.concurrency == 0 {
        anyhow::bail!("--rate, --burst and --concurrency must be above zero");
    }
    if args.principal_rate.is_nan()
        || args.principal_rate <= 0.0
        || args.principal_burst == 0
        || args.principal_concurrency == 0
    {
        anyhow::bail!(
            "--principal-rate, --principal-burst and --principal-concurrency must be above zero"
        );
    }
    let keys = KeyStore::load(&args.keys)?;
    engine.set_query_cache_capacity(args.query_vector_entries);
    let config = ServerConfig {
        limits: LimitConfig {
            rate_per_sec: args.rate,
            burst: args.burst,
            expensive_concurrency: args.concurrency,
            principal_rate_per_sec: args.principal_rate,
            principal_burst: args.principal_burst,
            principal_concurrency: args.principal_concurrency,
            ask_deadline: Duration::from_millis(args.ask_deadline_ms.max(1)),
            search_deadline: Duration::from_millis(args.search_deadline_ms.max(1)),
            ask_budget: dossier_agent::Budget {
                max_steps: args.ask_max_steps,
                max_evidence: args.ask_max_evidence,
                max_tokens: args.ask_max_tokens,
                max_planner_calls: args.ask_max_planner_calls,
                max_model_reranks: args.ask_max_model_reranks,
                max_judge_calls: args.ask_max_judge_calls,
                max_writer_calls: args.ask_max_writer_calls,
                max_translate_calls: args.ask_max_translate_calls,
                max_wall: Duration::from_millis(args.ask_deadline_ms.max(1)),
                ..dossier_agent::Budget::default()
            },
        },
        cache_entries: args.cache_entries,
        trace_entries: args.trace_entries,
        idempotency: Default::default(),
        uploads_dir: args.uploads.clone(),
        access_log: !args.quiet,
        drain_timeout: Duration::from_millis(args.drain_ms),
        follow_interval: Duration::from_millis(args.follow_ms.max(10)),
        audit_questions: args.audit_questions,
        audit_retention_days: args.audit_retention_days,
        audit_max_entries: args.audit_max_entries,
        audit_export_dir: args.audit_export_dir.clone(),
        connections: dossier_server::ConnectionLimits {
            header_read_timeout: Duration::from_millis(args.header_timeout_ms.max(1)),
            body_read_timeout: Duration::from_millis(args.body_timeout_ms.max(1)),
            idle_timeout: Duration::from_millis(args.idle_timeout_ms.max(1)),
            max_connections: args.max_connections.max(1),
            max_connections_per_address: args.max_connections_per_address,
            ..Default::default()
        },
        ..ServerConfig::default()
    };
    // Kept alive for as long as the server runs (a local model server stops with it).
    let llm = crate::ask::Llm::connect(&args.llm, &args.llm_model)?;
    let mut state = AppState::with_config(Arc::new(engine), Arc::new(keys), config);
    if let Some(model) = &llm.model {
        state = state.with_model(model.clone());
    }
    dossier_server::serve_blocking(args.addr, state)
        .with_context(|| format!("serving on {}", args.addr))?;
    drop(llm);
    Ok(ExitCode::SUCCESS)
}

#[derive(clap::Args)]
pub struct McpArgs {
    /// API keys, as for `dossier serve`; the session's key is `DOSSIER_API_KEY`.
    #[arg(long, env = "DOSSIER_KEYS")]
    keys: PathBuf,
    /// Chat model for the `ask` tool, as for `dossier serve`.
    #[arg(long, default_value = "none", env = "DOSSIER_LLM")]
    llm: String,
    #[arg(long, default_value = "default", env = "DOSSIER_LLM_MODEL")]
    llm_model: String,
}

/// `dossier mcp`: the MCP server over stdio, as the holder of `DOSSIER_API_KEY` (the
/// identity of every tool call; no tool takes one).
pub fn mcp(engine: Engine, args: &McpArgs) -> Result<ExitCode> {
    let key = std::env::var("DOSSIER_API_KEY").map_err(|_| {
        anyhow::anyhow!("set DOSSIER_API_KEY to the API key this MCP session acts as")
    })?;
    let keys = KeyStore::load(&args.keys)?;
    let llm = crate::ask::Llm::connect(&args.llm, &args.llm_model)?;
    let config = ServerConfig {
        access_log: false,
        ..ServerConfig::default()
    };
    let mut state = AppState::with_config(Arc::new(engine), Arc::new(keys), config);
    if let Some(model) = &llm.model {
        state = state.with_model(model.clone());
    }
    dossier_server::mcp::check_key(&state, &key).map_err(anyhow::Error::msg)?;
    dossier_server::mcp_stdio_blocking(state, key).context("serving MCP on stdio")?;
    drop(llm);
    Ok(ExitCode::SUCCESS)
}
