//! A randomised two-tenant corpus, written as files: the same shapes every time (a
//! public and a restricted document in tenant `ta`, one in tenant `tb`, an `orders`
//! table in each tenant, principals), with names, ids, keys and words drawn from a
//! seed. The oracle and isolation tests run over several seeds, so no rule can be
//! written to the fixture's sentences.

use std::path::Path;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// What a world holds, by who may see it.
#[derive(Debug, Clone)]
pub struct World {
    pub seed: u64,
    /// Documents `reader` may read (tenant `ta`, no ACL).
    pub visible_docs: Vec<String>,
    /// Documents that exist but `reader` may not read: restricted ones in `ta` and
    /// every document of `tb`.
    pub hidden_docs: Vec<String>,
    /// Entity names known only from hidden documents.
    pub hidden_entities: Vec<String>,
    /// Entity names of the visible document.
    pub visible_entities: Vec<String>,
    /// Order keys that exist but `reader` may not read (another owner in `ta`, or
    /// `tb`'s table).
    pub hidden_keys: Vec<String>,
    /// The order `reader` owns.
    pub own_key: String,
    /// Words that occur only in hidden documents.
    pub hidden_words: Vec<String>,
    pub used: std::collections::HashSet<String>,
    rng_state: u64,
}

fn word(rng: &mut StdRng, len: usize) -> String {
    (0..len)
        .map(|_| (b'a' + rng.gen_range(0..26)) as char)
        .collect()
}

impl World {
    /// Writes the corpus of `seed` under `dir` (`docs/`, `records/`,
    /// `principals.yaml`) and returns what it holds.
    pub fn write(dir: &Path, seed: u64) -> World {
        World::write_with(dir, seed, true)
    }

    /// The same world as `reader` sees it: the same names, ids and keys, without the
    /// documents and rows `reader` may not read. Whatever `reader` is told in the whole
    /// world must equal what they are told in this one.
    pub fn write_visible_only(dir: &Path, seed: u64) -> World {
        World::write_with(dir, seed, false)
    }

    fn write_with(dir: &Path, seed: u64, hidden: bool) -> World {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut used = std::collections::HashSet::new();
        let fresh = |used: &mut std::collections::HashSet<String>,
                     rng: &mut StdRng,
                     prefix: &str,
                     len: usize| loop {
            let s = format!("{prefix}{}", word(rng, len));
            if used.insert(s.clone()) {
                return s;
            }
        };
        let docs = dir.join("docs");
        let records = dir.join("records");
        std::fs::create_dir_all(&docs).unwrap();
        std::fs::create_dir_all(&records).unwrap();

        let doc = |id: String,
                   tenant: &str,
                   acl: Option<&str>,
                   a: &str,
                   b: &str,
                   secret_word: &str| {
            if !hidden && (acl.is_some() || tenant != "ta") {
                return id;
            }
            let acl = acl.map_or(String::new(), |g| format!("acl: [{g}]\n"));
            let text = format!(
                "---\nid: {id}\nversion: \"1\"\ntitle: Service notes {id}\ntenant: {tenant}\n{acl}effective_from: 2026-01-01\n---\n\
                 # Service notes\n\n## Dependencies\n{a} depends on {b}.\n\n\
                 ## Notes\nThe {secret_word} runbook applies to {a} during maintenance windows.\n"
            );
            std::fs::write(docs.join(format!("{id}.md")), text).unwrap();
            id
        };

        let ents: Vec<String> = (0..6)
            .map(|_| fresh(&mut used, &mut rng, "svc-", 6))
            .collect();
        let words: Vec<String> = (0..3).map(|_| fresh(&mut used, &mut rng, "", 9)).collect();
        let ids: Vec<String> = (0..3)
            .map(|_| fresh(&mut used, &mut rng, "d-", 8))
            .collect();
        let public = doc(ids[0].clone(), "ta", None, &ents[0], &ents[1], &words[0]);
        let restricted = doc(
            ids[1].clone(),
            "ta",
            Some("secret"),
            &ents[2],
            &ents[3],
            &words[1],
        );
        let other = doc(ids[2].clone(), "tb", None, &ents[4], &ents[5], &words[2]);

        // Orders: keys of one shape (`O-` and four digits) in both tenants.
        let mut key = |rng: &mut StdRng| loop {
            let k = format!("O-{:04}", rng.gen_range(1000..10000));
            if used.insert(k.clone()) {
                return k;
            }
        };
        let (own, others, tb_key) = (key(&mut rng), key(&mut rng), key(&mut rng));
        for (tenant, rows) in [
            (
                "ta",
                vec![(own.clone(), "reader"), (others.clone(), "admin-a")],
            ),
            ("tb", vec![(tb_key.clone(), "admin-b")]),
        ] {
            let t = records.join(tenant);
            std::fs::create_dir_all(&t).unwrap();
            std::fs::write(
                t.join("orders.schema.yaml"),
                format!(
                    "table: orders\ntenant: {tenant}\nkey: order_id\nowner_field: owner\nread_groups: [secret]\n"
                ),
            )
            .unwrap();
            let lines: String = rows
                .iter()
                .map(|(k, owner)| {
                    format!(
                        "{{\"order_id\":\"{k}\",\"owner\":\"{owner}\",\"status\":\"shipped\"}}\n"
                    )
                })
                .collect();
            std::fs::write(t.join("orders.jsonl"), lines).unwrap();
        }
        std::fs::write(
            dir.join("principals.yaml"),
            "principals:\n\
             - {id: reader, tenant: ta, groups: [staff]}\n\
             - {id: admin-a, tenant: ta, groups: [staff, secret]}\n\
             - {id: admin-b, tenant: tb, groups: [staff]}\n",
        )
        .unwrap();
        World {
            seed,
            visible_docs: vec![public],
            hidden_docs: vec![restricted, other],
            hidden_entities: ents[2..].to_vec(),
            visible_entities: ents[..2].to_vec(),
            hidden_keys: vec![others, tb_key],
            own_key: own,
            hidden_words: words[1..].to_vec(),
            used,
            rng_state: seed ^ 0x9e37_79b9_7f4a_7c15,
        }
    }

    /// An identifier of the same shape and length as `like` that names nothing in
    /// this world: the part after the last `-` is redrawn (its lowercase letters, or
    /// its digits when it has none), so prefixes such as `svc-` or `O-` and separators
    /// such as `@1#0` stay. A hexadecimal counter (a request id's `000000dc`) is
    /// redrawn whole, every digit: redrawing only its letters could land on an earlier
    /// request of the same server (`000000da`), which exists.
    pub fn missing_like(&mut self, like: &str) -> String {
        let mut rng = StdRng::seed_from_u64(self.rng_state);
        self.rng_state = rng.gen();
        let cut = like.rfind('-').map_or(0, |i| i + 1);
        let (head, tail) = like.split_at(cut);
        let hex = tail.len() >= 8
            && tail
                .chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c));
        let letters = tail.chars().any(|c| c.is_ascii_lowercase());
        loop {
            let redrawn: String = tail
                .chars()
                .map(|c| {
                    if hex {
                        char::from_digit(rng.gen_range(0..16), 16).unwrap()
                    } else if letters && c.is_ascii_lowercase() {
                        (b'a' + rng.gen_range(0..26)) as char
                    } else if !letters && c.is_ascii_digit() {
                        (b'0' + rng.gen_range(0..10)) as char
                    } else {
                        c
                    }
                })
                .collect();
            let s = format!("{head}{redrawn}");
            if s != like && self.used.insert(s.clone()) {
                return s;
            }
        }
    }
}

/// Seeds for one run: `DOSSIER_TEST_SEED` if set (to replay a failure), else fresh.
pub fn seeds(n: usize) -> Vec<u64> {
    if let Some(s) = std::env::var("DOSSIER_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return vec![s];
    }
    let mut rng = rand::thread_rng();
    (0..n).map(|_| rng.gen()).collect()
}
