//! The local chat model: llama.cpp's `llama-server` with the GGUF that
//! `scripts/setup-llm` installs, started on demand.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::{LlmError, OpenAiChat};

/// File name of the model `scripts/setup-llm` assembles in `.tools/models/`.
pub const DEFAULT_GGUF_NAME: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";

/// What to do when the local model is missing.
pub const SETUP_HINT: &str =
    "run scripts/setup-llm (builds .tools/llama/bin/llama-server and assembles the model in .tools/models/)";

/// Where `llama-server` lives under a workspace root.
const SERVER_REL: &str = ".tools/llama/bin/llama-server";
/// Lines of the server's output kept for error messages.
const LOG_LINES: usize = 200;
/// Lines of that output quoted in an error.
const TAIL_LINES: usize = 30;

/// How to start a [`LocalServer`]. [`LocalServerConfig::locate`] fills in the installed
/// binary and model and the defaults; change fields before
/// [`LocalServer::start_with`].
#[derive(Debug, Clone, PartialEq)]
pub struct LocalServerConfig {
    /// The `llama-server` executable.
    pub server: PathBuf,
    /// The GGUF model file.
    pub gguf: PathBuf,
    /// Context size in tokens (`-c`), shared by the prompt and the answer. Default 4096.
    pub ctx_size: u32,
    /// CPU threads for generation and prompt processing (`-t`, `-tb`). Default 2, or
    /// `$DOSSIER_LLM_THREADS` with [`locate`](Self::locate). Keep the total over all
    /// running servers at or below the number of cores: llama.cpp's threads wait for
    /// each other at every step, so two 2-thread servers generating at once on 2 busy
    /// cores run several times slower than two 1-thread servers.
    pub threads: u32,
    /// How long to wait for `/health` to report ready. Default 120 s.
    pub ready_timeout: Duration,
    /// More `llama-server` arguments, appended after the built-in ones.
    pub extra_args: Vec<String>,
}

impl LocalServerConfig {
    /// The installed server and model with default settings.
    ///
    /// The server is `$DOSSIER_LLAMA_SERVER` when set, else `.tools/llama/bin/llama-server`
    /// in the nearest ancestor (of the running executable, or
    /// of this crate's source directory) that has one. The model is `$DOSSIER_LLM_GGUF`
    /// when set, else `.tools/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf` found the
    /// same way. `$DOSSIER_LLM_THREADS`, when set, replaces the default thread count.
    /// Fails with [`LlmError::Setup`], saying to run `scripts/setup-llm`, when either
    /// file is missing, when the model is not a GGUF file, and when
    /// `$DOSSIER_LLM_THREADS` is not a positive number.
    pub fn locate() -> Result<Self, LlmError> {
        let server = locate_file("DOSSIER_LLAMA_SERVER", SERVER_REL, "llama-server")?;
        let gguf = locate_file(
            "DOSSIER_LLM_GGUF",
            &format!(".tools/models/{DEFAULT_GGUF_NAME}"),
            "the GGUF model",
        )?;
        check_gguf(&gguf)?;
        let mut config = Self::new(server, gguf);
        if let Some(threads) = std::env::var_os("DOSSIER_LLM_THREADS").filter(|v| !v.is_empty()) {
            config.threads = threads
                .to_str()
                .and_then(|t| t.trim().parse().ok())
                .filter(|&t: &u32| t > 0)
                .ok_or_else(|| {
                    LlmError::Setup(format!(
                        "DOSSIER_LLM_THREADS={}: expected a positive number",
                        threads.to_string_lossy()
                    ))
                })?;
        }
        Ok(config)
    }

    /// Explicit paths with default settings; nothing is checked until
    /// [`LocalServer::start_with`].
    pub fn new(server: impl Into<PathBuf>, gguf: impl Into<PathBuf>) -> Self {
        Self {
            server: server.into(),
            gguf: gguf.into(),
            ctx_size: 4096,
            threads: 2,
            ready_timeout: Duration::from_secs(120),
            extra_args: Vec::new(),
        }
    }

    /// The model name the server answers to (`--alias`): the GGUF file name without
    /// `.gguf`.
    pub fn alias(&self) -> String {
        self.gguf
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "local".into())
    }

    /// The `llama-server` arguments for `port`.
    ///
    /// `--jinja` makes the server apply the model's own chat template, which is what
    /// turns `tools` into tool calls; `-np 1` gives the single slot the whole context.
    pub fn args(&self, port: u16) -> Vec<String> {
        let mut args: Vec<String> = vec![
            "-m".into(),
            self.gguf.to_string_lossy().into_owned(),
            "--alias".into(),
            self.alias(),
            "--host".into(),
            "127.0.0.1".into(),
            "--port".into(),
            port.to_string(),
            "--jinja".into(),
            "-c".into(),
            self.ctx_size.to_string(),
            "-np".into(),
            "1".into(),
            "-t".into(),
            self.threads.to_string(),
            "-tb".into(),
            self.threads.to_string(),
            "--no-ui".into(),
        ];
        args.extend(self.extra_args.iter().cloned());
        args
    }
}

/// `$var` when set (it must exist), else `rel` under the nearest ancestor that has it.
fn locate_file(var: &str, rel: &str, what: &str) -> Result<PathBuf, LlmError> {
    if let Some(path) = std::env::var_os(var).filter(|v| !v.is_empty()) {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(LlmError::Setup(format!(
                "{var}={} does not exist; {SETUP_HINT}, or point {var} at {what}",
                path.display()
            )))
        };
    }
    let starts = search_starts();
    starts
        .iter()
        .flat_map(|start| start.ancestors())
        .map(|dir| dir.join(rel))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            let looked: Vec<String> = starts.iter().map(|s| s.display().to_string()).collect();
            LlmError::Setup(format!(
                "{what} not found: no {rel} above {}; {SETUP_HINT} (or set {var})",
                looked.join(" or ")
            ))
        })
}

/// Directories whose ancestors may hold `.tools/`: the running executable's (so
/// `target/debug/dossier` finds `<repo>/.tools`) and this crate's source directory at
/// build time (so tests find it whatever their working directory). Never the current
/// directory: a `.tools/` planted above wherever the user happens to stand must not
/// choose the program that runs (the same rule as the e5 engine's).
fn search_starts() -> Vec<PathBuf> {
    let mut starts = Vec::new();
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_path_buf))
    {
        starts.push(dir);
    }
    starts.push(PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    starts
}

/// Fails unless `path` starts with the GGUF magic.
fn check_gguf(path: &Path) -> Result<(), LlmError> {
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .map_err(|e| {
            LlmError::Setup(format!("cannot read {}: {e}; {SETUP_HINT}", path.display()))
        })?;
    if &magic != b"GGUF" {
        return Err(LlmError::Setup(format!(
            "{} is not a GGUF file; {SETUP_HINT}",
            path.display()
        )));
    }
    Ok(())
}

/// The last lines a child process wrote, kept by reader threads.
#[derive(Clone, Default)]
struct LogTail {
    lines: Arc<Mutex<VecDeque<String>>>,
    /// Pipes still being read.
    open: Arc<AtomicUsize>,
}

impl LogTail {
    /// Drains `pipe` on a thread (so the child never blocks on a full pipe).
    fn follow(&self, pipe: impl Read + Send + 'static) {
        let lines = self.lines.clone();
        let open = self.open.clone();
        open.fetch_add(1, Ordering::SeqCst);
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                let mut lines = lines.lock().unwrap_or_else(|p| p.into_inner());
                if lines.len() == LOG_LINES {
                    lines.pop_front();
                }
                lines.push_back(line);
            }
            open.fetch_sub(1, Ordering::SeqCst);
        });
    }

    /// Waits (at most `limit`) until every pipe reached its end, i.e. all the output of
    /// an exited child has been collected.
    fn drain(&self, limit: Duration) {
        let started = Instant::now();
        while self.open.load(Ordering::SeqCst) > 0 && started.elapsed() < limit {
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn tail(&self, n: usize) -> String {
        let lines = self.lines.lock().unwrap_or_else(|p| p.into_inner());
        let skip = lines.len().saturating_sub(n);
        lines
            .iter()
            .skip(skip)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// A running `llama-server` on a free localhost port, killed on drop.
///
/// ```no_run
/// use std::time::Duration;
/// use dossier_llm::{ChatModel, ChatRequest, LocalServer, Message};
///
/// let server = LocalServer::start()?; // .tools/ as installed by scripts/setup-llm
/// let model = server.chat_model(Duration::from_secs(120))?;
/// let answer = model.chat(&ChatRequest::new(vec![Message::user("2+2?")]))?;
/// # Ok::<(), dossier_llm::LlmError>(())
/// ```
pub struct LocalServer {
    child: Child,
    base_url: String,
    config: LocalServerConfig,
    log: LogTail,
}

impl std::fmt::Debug for LocalServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalServer")
            .field("pid", &self.child.id())
            .field("base_url", &self.base_url)
            .field("config", &self.config)
            .finish()
    }
}

/// Why one start attempt failed, and whether another port may help.
struct Attempt {
    error: LlmError,
    port_clash: bool,
}

impl LocalServer {
    /// Starts the installed server and model ([`LocalServerConfig::locate`]) and waits
    /// until it is ready.
    pub fn start() -> Result<Self, LlmError> {
        Self::start_with(LocalServerConfig::locate()?)
    }

    /// Starts `llama-server` as configured and waits until `/health` says it is ready
    /// (at most `config.ready_timeout`). A failure is [`LlmError::Setup`] when a file is
    /// missing and [`LlmError::Startup`], with the tail of the server's log, when the
    /// server exits or stays unready.
    pub fn start_with(config: LocalServerConfig) -> Result<Self, LlmError> {
        for path in [&config.server, &config.gguf] {
            if !path.is_file() {
                return Err(LlmError::Setup(format!(
                    "{} does not exist; {SETUP_HINT}",
                    path.display()
                )));
            }
        }
        check_gguf(&config.gguf)?;
        // The free port is found by binding and releasing it, so another process can take
        // it in between: then the server exits saying so, and another port is tried.
        let mut attempts = 0;
        loop {
            attempts += 1;
            match Self::spawn(&config) {
                Ok(server) => return Ok(server),
                Err(a) if a.port_clash && attempts < 3 => continue,
                Err(a) => return Err(a.error),
            }
        }
    }

    fn spawn(config: &LocalServerConfig) -> Result<Self, Attempt> {
        let fail = |error| Attempt {
            error,
            port_clash: false,
        };
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| fail(LlmError::Startup(format!("no free localhost port: {e}"))))?
            .port();
        let mut child = Command::new(&config.server)
            .args(config.args(port))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                fail(LlmError::Setup(format!(
                    "cannot run {}: {e}; {SETUP_HINT}",
                    config.server.display()
                )))
            })?;
        let log = LogTail::default();
        if let Some(out) = child.stdout.take() {
            log.follow(out);
        }
        if let Some(err) = child.stderr.take() {
            log.follow(err);
        }
        // From here on, dropping `server` kills the child.
        let mut server = Self {
            child,
            base_url: format!("http://127.0.0.1:{port}"),
            config: config.clone(),
            log,
        };
        server.wait_ready()?;
        Ok(server)
    }

    fn wait_ready(&mut self) -> Result<(), Attempt> {
        let started = Instant::now();
        let health = format!("{}/health", self.base_url);
        let client = reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| Attempt {
                error: LlmError::Setup(format!("HTTP client: {e}")),
                port_clash: false,
            })?;
        let mut last = String::from("no answer yet");
        loop {
            if let Ok(resp) = client.get(&health).send() {
                if resp.status().is_success() {
                    return Ok(());
                }
                last = format!("HTTP {}", resp.status().as_u16());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                self.log.drain(Duration::from_secs(2));
                let tail = self.log.tail(TAIL_LINES);
                let lower = tail.to_ascii_lowercase();
                return Err(Attempt {
                    port_clash: lower.contains("bind") || lower.contains("address already in use"),
                    error: LlmError::Startup(format!(
                        "llama-server ({}) exited with {status} before it was ready; its last output:\n{tail}",
                        self.config.server.display()
                    )),
                });
            }
            if started.elapsed() > self.config.ready_timeout {
                return Err(Attempt {
                    port_clash: false,
                    error: LlmError::Startup(format!(
                        "llama-server at {} not ready after {:?} (last /health: {last}); its last output:\n{}",
                        self.base_url,
                        self.config.ready_timeout,
                        self.log.tail(TAIL_LINES)
                    )),
                });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Root URL of the server (`http://127.0.0.1:PORT`), for [`OpenAiChat::new`].
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The configuration it was started with.
    pub fn config(&self) -> &LocalServerConfig {
        &self.config
    }

    /// Process id of the server.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// An [`OpenAiChat`] for this server, giving up on a request after `timeout`.
    pub fn chat_model(&self, timeout: Duration) -> Result<OpenAiChat, LlmError> {
        OpenAiChat::new(&self.base_url, &self.config.alias(), timeout)
    }

    /// The last `lines` lines the server printed (for diagnosing a bad answer).
    pub fn log_tail(&self, lines: usize) -> String {
        self.log.tail(lines)
    }
}

impl Drop for LocalServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    /// A scratch directory unique to this test process and `name`.
    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("dossier-llm-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn fake_gguf(dir: &Path) -> PathBuf {
        let path = dir.join("tiny-model.gguf");
        std::fs::write(&path, b"GGUF\x03\x00\x00\x00").unwrap();
        path
    }

    fn script(dir: &Path, body: &str) -> PathBuf {
        let path = dir.join("fake-llama-server");
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    #[test]
    fn args_enable_jinja_small_context_and_two_threads() {
        let cfg = LocalServerConfig::new("/x/llama-server", "/m/qwen-q4.gguf");
        let args = cfg.args(8123).join(" ");
        assert_eq!(
            args,
            "-m /m/qwen-q4.gguf --alias qwen-q4 --host 127.0.0.1 --port 8123 --jinja -c 4096 -np 1 -t 2 -tb 2 --no-ui"
        );
        assert_eq!(cfg.alias(), "qwen-q4");
    }

    #[test]
    fn missing_files_say_to_run_setup() {
        let dir = scratch("missing");
        let e = LocalServer::start_with(LocalServerConfig::new(dir.join("nope"), fake_gguf(&dir)))
            .unwrap_err();
        assert!(matches!(e, LlmError::Setup(_)), "{e:?}");
        assert!(e.to_string().contains("scripts/setup-llm"), "{e}");

        let not_gguf = dir.join("model.gguf");
        std::fs::write(&not_gguf, b"<html>").unwrap();
        let server = script(&dir, "exit 0");
        let e = LocalServer::start_with(LocalServerConfig::new(server, not_gguf)).unwrap_err();
        assert!(e.to_string().contains("not a GGUF file"), "{e}");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_server_that_dies_reports_its_output() {
        let dir = scratch("dies");
        let server = script(
            &dir,
            "echo 'loading model' >&2\necho 'error: unknown argument' >&2\nexit 3",
        );
        let e =
            LocalServer::start_with(LocalServerConfig::new(server, fake_gguf(&dir))).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, LlmError::Startup(_)), "{e:?}");
        assert!(msg.contains("exit status: 3"), "{msg}");
        assert!(msg.contains("error: unknown argument"), "{msg}");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_server_that_never_gets_ready_times_out() {
        let dir = scratch("hangs");
        let server = script(&dir, "echo 'warming up' >&2\nexec sleep 30");
        let mut cfg = LocalServerConfig::new(server, fake_gguf(&dir));
        cfg.ready_timeout = Duration::from_millis(500);
        let started = Instant::now();
        let e = LocalServer::start_with(cfg).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("not ready after") && msg.contains("warming up"),
            "{msg}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the child was not killed"
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}
