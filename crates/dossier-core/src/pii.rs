//! Personal and sensitive data: what a tenant marks sensitive, how it is found in text,
//! and the mask that replaces it for a reader who may not see it.
//!
//! A [`PiiPolicy`] (the deployment's `--pii FILE`) names, per tenant, the kinds of value
//! to mask — built-in detectors for e-mail addresses, phone numbers, ID numbers, bank
//! cards and postal addresses in Chinese and English formats, plus the tenant's own
//! patterns — and the groups that may see them unmasked. Record schemas mark whole
//! fields sensitive (`sensitive: [phone, address]`); those are masked whatever they hold.
//!
//! The store attaches a [`Masker`] to every `Scope` whose principal may not see the
//! tenant's sensitive values; everything that hands text to a caller or a model masks
//! with it. A mask names the kind it hides (`[phone]`) and nothing of the value.
//!
//! Detection is by rule, so it is for well-formed values: a phone number spelled out in
//! words is not found. The rules prefer masking a look-alike (an order number shaped
//! like a phone number) to letting a real value through.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use regex::Regex;
use serde::{Deserialize, Serialize};

/// The built-in kinds.
pub const BUILT_IN: &[&str] = &["email", "phone", "id_number", "bank_card", "address"];

/// Own patterns a tenant may declare, and the longest each may be.
pub const MAX_OWN_PATTERNS: usize = 32;
pub const MAX_PATTERN_LEN: usize = 512;

/// The policy as written (`--pii FILE`, YAML).
///
/// ```yaml
/// tenants:
///   shop:
///     mask: [phone, email, id_number, bank_card, address]
///     unmask_groups: [support-lead]
///     patterns:
///       - {name: member_no, regex: 'M\d{8}'}
///   "*": {mask: [email]}          # every other tenant
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicySpec {
    #[serde(default)]
    pub tenants: BTreeMap<String, TenantSpec>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantSpec {
    /// Kinds to mask: built-in names and the names of `patterns`.
    #[serde(default)]
    pub mask: Vec<String>,
    /// Groups whose members see the values unmasked.
    #[serde(default)]
    pub unmask_groups: Vec<String>,
    #[serde(default)]
    pub patterns: Vec<OwnPattern>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OwnPattern {
    pub name: String,
    pub regex: String,
}

/// A checked, compiled policy.
#[derive(Debug, Default)]
pub struct PiiPolicy {
    tenants: BTreeMap<String, TenantPolicy>,
    /// For tenants without a policy: masks no text, and still hides record fields
    /// marked sensitive (no group was granted them).
    nothing: Arc<Masker>,
}

#[derive(Debug)]
struct TenantPolicy {
    unmask_groups: Vec<String>,
    masker: Arc<Masker>,
}

impl PiiPolicy {
    /// No masking anywhere (the default).
    pub fn none() -> PiiPolicy {
        PiiPolicy::default()
    }

    /// Checks and compiles `spec`: unknown kinds, bad or oversized patterns and names
    /// that are not `[a-z0-9_]` are errors naming the tenant.
    pub fn compile(spec: &PolicySpec) -> Result<PiiPolicy, String> {
        let mut tenants = BTreeMap::new();
        for (tenant, t) in &spec.tenants {
            if t.patterns.len() > MAX_OWN_PATTERNS {
                return Err(format!(
                    "pii policy, tenant {tenant}: more than {MAX_OWN_PATTERNS} patterns"
                ));
            }
            let mut own = BTreeMap::new();
            for p in &t.patterns {
                if p.name.is_empty()
                    || p.name.len() > 40
                    || !p
                        .name
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
                {
                    return Err(format!(
                        "pii policy, tenant {tenant}: pattern name {:?} must be 1-40 of a-z, 0-9, _",
                        p.name
                    ));
                }
                if BUILT_IN.contains(&p.name.as_str()) {
                    return Err(format!(
                        "pii policy, tenant {tenant}: pattern {} shadows a built-in kind",
                        p.name
                    ));
                }
                if p.regex.len() > MAX_PATTERN_LEN {
                    return Err(format!(
                        "pii policy, tenant {tenant}: pattern {} is over {MAX_PATTERN_LEN} bytes",
                        p.name
                    ));
                }
                let re = regex::RegexBuilder::new(&p.regex)
                    .size_limit(1 << 20)
                    .build()
                    .map_err(|e| format!("pii policy, tenant {tenant}: pattern {}: {e}", p.name))?;
                if re.is_match("") {
                    return Err(format!(
                        "pii policy, tenant {tenant}: pattern {} matches empty text",
                        p.name
                    ));
                }
                own.insert(p.name.clone(), re);
            }
            let mut detectors = Vec::new();
            for kind in &t.mask {
                if let Some(re) = own.get(kind) {
                    detectors.push(Detector::Own {
                        name: kind.clone(),
                        re: re.clone(),
                    });
                } else if BUILT_IN.contains(&kind.as_str()) {
                    detectors.push(Detector::BuiltIn(kind.clone()));
                } else {
                    return Err(format!(
                        "pii policy, tenant {tenant}: unknown kind {kind:?} (built in: {}; or a pattern's name)",
                        BUILT_IN.join(", ")
                    ));
                }
            }
            tenants.insert(
                tenant.clone(),
                TenantPolicy {
                    unmask_groups: t.unmask_groups.clone(),
                    masker: Arc::new(Masker { detectors }),
                },
            );
        }
        Ok(PiiPolicy {
            tenants,
            nothing: Arc::default(),
        })
    }

    /// The masker for a reader of `tenant` in `groups`: `None` when one of its groups
    /// may see the tenant's sensitive values. Record fields marked sensitive are hidden
    /// whenever this is `Some` — also for a tenant without a policy, whose masker masks
    /// no text (a field marked sensitive is hidden until a group is granted it).
    pub fn masker_for(&self, tenant: &str, groups: &[String]) -> Option<Arc<Masker>> {
        let Some(t) = self.tenants.get(tenant).or_else(|| self.tenants.get("*")) else {
            return Some(self.nothing.clone());
        };
        if groups.iter().any(|g| t.unmask_groups.contains(g)) {
            return None;
        }
        Some(t.masker.clone())
    }

    /// Whether any tenant masks anything.
    pub fn is_empty(&self) -> bool {
        self.tenants.is_empty()
    }
}

#[derive(Debug)]
enum Detector {
    BuiltIn(String),
    Own { name: String, re: Regex },
}

/// Masks the sensitive values of one tenant's text.
#[derive(Debug, Default)]
pub struct Masker {
    detectors: Vec<Detector>,
}

/// The mask of a value of `kind`.
pub fn mask_of(kind: &str) -> String {
    format!("[{kind}]")
}

impl Masker {
    /// Whether this masker changes any text (a tenant without a policy has one that
    /// does not; it still hides record fields marked sensitive).
    pub fn masks_text(&self) -> bool {
        !self.detectors.is_empty()
    }

    /// `text` with every value the tenant masks replaced by its kind's mask.
    pub fn mask<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut spans: Vec<(usize, usize, &str)> = Vec::new();
        for d in &self.detectors {
            match d {
                Detector::BuiltIn(kind) => builtin::find(kind, text, &mut spans),
                Detector::Own { name, re } => spans.extend(
                    re.find_iter(text)
                        .map(|m| (m.start(), m.end(), name.as_str())),
                ),
            }
        }
        if spans.is_empty() {
            return Cow::Borrowed(text);
        }
        // Overlaps merge into the earliest span's kind (a longer match wins its range).
        spans.sort_by_key(|s| (s.0, std::cmp::Reverse(s.1)));
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        let mut i = 0;
        while i < spans.len() {
            let (start, mut end, kind) = spans[i];
            i += 1;
            while i < spans.len() && spans[i].0 < end {
                end = end.max(spans[i].1);
                i += 1;
            }
            if start < at {
                continue;
            }
            out.push_str(&text[at..start]);
            out.push_str(&mask_of(kind));
            at = end;
        }
        out.push_str(&text[at..]);
        Cow::Owned(out)
    }

    /// Masks every string in `v` (keys too), in place.
    pub fn mask_json(&self, v: &mut serde_json::Value) {
        use serde_json::Value;
        match v {
            Value::String(s) => {
                if let Cow::Owned(m) = self.mask(s) {
                    *s = m;
                }
            }
            Value::Array(a) => a.iter_mut().for_each(|x| self.mask_json(x)),
            Value::Object(o) => {
                let masked: serde_json::Map<String, Value> = std::mem::take(o)
                    .into_iter()
                    .map(|(k, mut x)| {
                        self.mask_json(&mut x);
                        (self.mask(&k).into_owned(), x)
                    })
                    .collect();
                *o = masked;
            }
            _ => {}
        }
    }
}

/// The built-in detectors. Each finds candidates by a pattern and keeps those that pass
/// the kind's own check (a checksum, a plausible length, digits not glued to others).
mod builtin {
    use std::sync::OnceLock;

    use regex::Regex;

    fn re(cell: &'static OnceLock<Regex>, pattern: &str) -> &'static Regex {
        cell.get_or_init(|| Regex::new(pattern).expect("built-in pattern"))
    }

    pub(super) fn find<'k>(kind: &'k str, text: &str, out: &mut Vec<(usize, usize, &'k str)>) {
        let mut push = |s: usize, e: usize| out.push((s, e, kind));
        match kind {
            "email" => {
                static R: OnceLock<Regex> = OnceLock::new();
                let r = re(
                    &R,
                    r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?)*\.[A-Za-z]{2,}",
                );
                r.find_iter(text).for_each(|m| push(m.start(), m.end()));
            }
            "phone" => {
                static R: OnceLock<Regex> = OnceLock::new();
                // Mainland mobiles (optionally +86, separated 3-4-4), landlines with an
                // area code (010-12345678, (021) 1234 5678), NANP ((555) 123-4567,
                // 555-123-4567) and international numbers written with a plus.
                let r = re(
                    &R,
                    r"(?x)
                    (?:\+?86[\s\-]?)?1[3-9]\d(?:[\s\-]?\d{4}){2}
                    | \(?0\d{2,3}\)?[\s\-]?\d{3,4}[\s\-]?\d{4}
                    | (?:\+?1[\s\-.]?)?\(\d{3}\)[\s\-.]?\d{3}[\s\-.]\d{4}
                    | (?:\+?1[\s\-.]?)?\d{3}[\-.]\d{3}[\-.]\d{4}
                    | \+\d{1,3}[\s\-]?(?:\(\d{1,4}\)[\s\-]?)?\d{2,4}(?:[\s\-]?\d{2,4}){1,4}
                    ",
                );
                for m in r.find_iter(text) {
                    if free_standing(text, m.start(), m.end()) {
                        push(m.start(), m.end());
                    }
                }
            }
            "id_number" => {
                static R: OnceLock<Regex> = OnceLock::new();
                // Mainland resident ID (18, with its check digit), US SSN (123-45-6789),
                // passport-like letter + 8 digits is left to own patterns.
                let r = re(&R, r"\d{17}[\dXx]|\d{3}-\d{2}-\d{4}");
                for m in r.find_iter(text) {
                    let s = m.as_str();
                    let ok = if s.len() == 18 {
                        cn_id_checks(s)
                    } else {
                        !s.starts_with("000") && !s.starts_with("666") && !s.starts_with('9')
                    };
                    if ok && free_standing(text, m.start(), m.end()) {
                        push(m.start(), m.end());
                    }
                }
            }
            "bank_card" => {
                static R: OnceLock<Regex> = OnceLock::new();
                let r = re(&R, r"\d(?:[\s\-]?\d){12,18}");
                for m in r.find_iter(text) {
                    let digits: Vec<u32> =
                        m.as_str().chars().filter_map(|c| c.to_digit(10)).collect();
                    if (13..=19).contains(&digits.len())
                        && luhn(&digits)
                        && free_standing(text, m.start(), m.end())
                    {
                        push(m.start(), m.end());
                    }
                }
            }
            "address" => {
                static CN: OnceLock<Regex> = OnceLock::new();
                static EN: OnceLock<Regex> = OnceLock::new();
                // 〔省〕〔市〕〔区/县〕…路/街/道/巷/弄 + 号〔楼/室…〕
                let cn = re(
                    &CN,
                    r"(?:\p{Han}{2,8}(?:省|自治区))?(?:\p{Han}{1,8}市)?(?:\p{Han}{1,8}(?:区|县|镇))?\p{Han}{1,12}(?:路|街|大道|道|巷|弄|胡同)[0-9０-９一二三四五六七八九十百]+号(?:[0-9A-Za-z\-]+(?:栋|幢|楼|单元|室|号楼))*(?:[0-9]+室)?",
                );
                let en = re(
                    &EN,
                    r"\b\d{1,6}\s+(?:[A-Z][A-Za-z]+\s+){1,4}(?:Street|St\.?|Avenue|Ave\.?|Road|Rd\.?|Boulevard|Blvd\.?|Lane|Ln\.?|Drive|Dr\.?|Way|Court|Ct\.?|Place|Pl\.?|Terrace|Square)\b(?:,?\s+(?:Apt|Apartment|Suite|Unit|Flat)\.?\s*#?[0-9A-Za-z\-]+)?",
                );
                cn.find_iter(text).for_each(|m| push(m.start(), m.end()));
                en.find_iter(text).for_each(|m| push(m.start(), m.end()));
            }
            _ => {}
        }
    }

    /// Not part of a longer run of digits or letters (an order number, a hash).
    fn free_standing(text: &str, start: usize, end: usize) -> bool {
        let before = text[..start].chars().next_back();
        let after = text[end..].chars().next();
        !before.is_some_and(|c| c.is_ascii_alphanumeric())
            && !after.is_some_and(|c| c.is_ascii_alphanumeric())
    }

    /// The mainland ID check digit (ISO 7064 MOD 11-2) and a plausible birth date.
    pub(super) fn cn_id_checks(s: &str) -> bool {
        const W: [u32; 17] = [7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2];
        const C: &[u8; 11] = b"10X98765432";
        let b = s.as_bytes();
        if b.len() != 18 {
            return false;
        }
        let mut sum = 0;
        for (i, w) in W.iter().enumerate() {
            let Some(d) = (b[i] as char).to_digit(10) else {
                return false;
            };
            sum += d * w;
        }
        let year: u32 = s[6..10].parse().unwrap_or(0);
        let month: u32 = s[10..12].parse().unwrap_or(0);
        let day: u32 = s[12..14].parse().unwrap_or(0);
        (1900..=2100).contains(&year)
            && (1..=12).contains(&month)
            && (1..=31).contains(&day)
            && C[(sum % 11) as usize] == b[17].to_ascii_uppercase()
    }

    pub(super) fn luhn(digits: &[u32]) -> bool {
        let sum: u32 = digits
            .iter()
            .rev()
            .enumerate()
            .map(|(i, &d)| {
                if i % 2 == 1 {
                    let x = d * 2;
                    if x > 9 {
                        x - 9
                    } else {
                        x
                    }
                } else {
                    d
                }
            })
            .sum();
        sum.is_multiple_of(10)
    }
}

/// For tests across the workspace: well-formed values of each kind (valid check digits),
/// made from `seed`, so that corpora can be generated rather than written down.
pub mod samples {
    /// A mainland mobile number.
    pub fn cn_mobile(seed: u64) -> String {
        format!(
            "1{}{:09}",
            3 + seed % 7,
            (seed.wrapping_mul(2654435761)) % 1_000_000_000
        )
    }

    /// A NANP number, `(555) 123-4567` style.
    pub fn us_phone(seed: u64) -> String {
        let n = seed.wrapping_mul(40503) % 10_000_000;
        format!("({}) {:03}-{:04}", 201 + seed % 700, n / 10_000, n % 10_000)
    }

    pub fn email(seed: u64) -> String {
        format!(
            "user{}.{}@mail{}.example.com",
            seed % 9973,
            seed % 89,
            seed % 7
        )
    }

    /// A mainland ID number with a valid date and check digit.
    pub fn cn_id(seed: u64) -> String {
        const W: [u32; 17] = [7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2];
        const C: &[u8; 11] = b"10X98765432";
        let body = format!(
            "{:06}{}{:02}{:02}{:03}",
            110_000 + seed % 800_000,
            1950 + seed % 60,
            1 + seed % 12,
            1 + seed % 28,
            seed % 1000
        );
        let sum: u32 = body
            .bytes()
            .zip(W)
            .map(|(b, w)| u32::from(b - b'0') * w)
            .sum();
        format!("{body}{}", C[(sum % 11) as usize] as char)
    }

    /// A 16-digit card number passing Luhn, grouped by four.
    pub fn bank_card(seed: u64) -> String {
        let mut d: Vec<u32> = format!("62{:013}", seed.wrapping_mul(7919) % 10_000_000_000_000)
            .chars()
            .map(|c| c.to_digit(10).unwrap())
            .collect();
        let check = (0..10)
            .find(|c| {
                let mut all = d.clone();
                all.push(*c);
                super::builtin::luhn(&all)
            })
            .unwrap();
        d.push(check);
        let s: String = d
            .iter()
            .map(|x| char::from_digit(*x, 10).unwrap())
            .collect();
        format!("{} {} {} {}", &s[0..4], &s[4..8], &s[8..12], &s[12..16])
    }

    pub fn cn_address(seed: u64) -> String {
        const ROADS: [&str; 4] = ["南京西路", "中山北路", "人民大道", "解放街"];
        format!(
            "上海市静安区{}{}号{}室",
            ROADS[(seed % 4) as usize],
            1 + seed % 999,
            100 + seed % 900
        )
    }

    pub fn en_address(seed: u64) -> String {
        const STREETS: [&str; 4] = ["Maple Street", "Harbor Avenue", "King Road", "Elm Drive"];
        format!(
            "{} {}, Apt {}",
            1 + seed % 9999,
            STREETS[(seed % 4) as usize],
            1 + seed % 40
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(mask: &[&str]) -> PiiPolicy {
        let spec = PolicySpec {
            tenants: [(
                "shop".to_string(),
                TenantSpec {
                    mask: mask.iter().map(|s| s.to_string()).collect(),
                    unmask_groups: vec!["support-lead".into()],
                    patterns: vec![OwnPattern {
                        name: "member_no".into(),
                        regex: r"M\d{8}".into(),
                    }],
                },
            )]
            .into(),
        };
        PiiPolicy::compile(&spec).unwrap()
    }

    fn all() -> Arc<Masker> {
        policy(&[
            "email",
            "phone",
            "id_number",
            "bank_card",
            "address",
            "member_no",
        ])
        .masker_for("shop", &["customer".into()])
        .unwrap()
    }

    #[test]
    fn generated_values_of_every_kind_are_masked_in_running_text() {
        let m = all();
        for seed in 0..300u64 {
            let values = [
                (samples::cn_mobile(seed), "phone"),
                (format!("+86 {}", samples::cn_mobile(seed)), "phone"),
                (samples::us_phone(seed), "phone"),
                (samples::email(seed), "email"),
                (samples::cn_id(seed), "id_number"),
                (samples::bank_card(seed), "bank_card"),
                (samples::cn_address(seed), "address"),
                (samples::en_address(seed), "address"),
                (format!("M{:08}", seed * 37), "member_no"),
            ];
            for (v, kind) in values {
                for text in [
                    format!("联系方式：{v}。"),
                    format!("Contact {v}, thanks"),
                    format!("({v})"),
                    v.clone(),
                ] {
                    let out = m.mask(&text);
                    assert!(!out.contains(&v), "{kind} {v:?} left in {out:?}");
                    assert!(out.contains(&mask_of(kind)), "{kind} {v:?} → {out:?}");
                }
            }
        }
    }

    #[test]
    fn ordinary_text_is_left_alone() {
        let m = all();
        for text in [
            "订单 A123 于 2025-03-31 发货，退货期 30 天。",
            "API v2.0 uses OAuth 2.0 and mTLS; see RFC 8705 section 3.",
            "Order #20250331 shipped 14 items at 09:30.",
            "版本 1.2.3 的 SHA 为 9f86d081884c7d659a2feaa0c55ad015",
            "耳机 7 天无理由退货，需保持包装完好。",
            "Incident INC-4821 lasted 45 minutes; 3 of 12 nodes failed.",
            "Price: 1,299.00 CNY; quantity 1000000.",
        ] {
            assert_eq!(m.mask(text), text);
        }
        // A run of digits that merely contains a number-shaped part is not split.
        assert_eq!(m.mask("SKU 9913812345678001"), "SKU 9913812345678001");
    }

    #[test]
    fn unmask_groups_and_other_tenants_see_values() {
        let p = policy(&["phone"]);
        let phone = samples::cn_mobile(1);
        assert!(p.masker_for("shop", &["support-lead".into()]).is_none());
        assert!(p.masker_for("shop", &[]).is_some());
        // A tenant without a policy: text as it is (its sensitive fields stay hidden).
        let acme = p.masker_for("acme", &[]).unwrap();
        assert_eq!(acme.mask(&phone), phone);
        assert!(PiiPolicy::none().masker_for("acme", &[]).is_some());
    }

    #[test]
    fn check_digits_decide() {
        let good = samples::cn_id(42);
        let mut bad = good.clone().into_bytes();
        bad[17] = if bad[17] == b'1' { b'2' } else { b'1' };
        let bad = String::from_utf8(bad).unwrap();
        let m = policy(&["id_number"]).masker_for("shop", &[]).unwrap();
        assert!(!m.mask(&good).contains(&good));
        assert_eq!(m.mask(&bad), bad, "a wrong check digit is no ID number");
        let card = samples::bank_card(7).replace(' ', "");
        let mut wrong: Vec<char> = card.chars().collect();
        wrong[15] = char::from_digit((wrong[15].to_digit(10).unwrap() + 1) % 10, 10).unwrap();
        let wrong: String = wrong.into_iter().collect();
        let m = policy(&["bank_card"]).masker_for("shop", &[]).unwrap();
        assert!(!m.mask(&card).contains(&card));
        assert_eq!(m.mask(&wrong), wrong);
    }

    #[test]
    fn bad_policies_are_refused_with_the_reason() {
        let bad = |mask: &[&str], patterns: Vec<OwnPattern>| {
            PiiPolicy::compile(&PolicySpec {
                tenants: [(
                    "t".to_string(),
                    TenantSpec {
                        mask: mask.iter().map(|s| s.to_string()).collect(),
                        unmask_groups: vec![],
                        patterns,
                    },
                )]
                .into(),
            })
            .unwrap_err()
        };
        let p = |n: &str, r: &str| OwnPattern {
            name: n.into(),
            regex: r.into(),
        };
        assert!(bad(&["ssn"], vec![]).contains("unknown kind"));
        assert!(bad(&["x"], vec![p("x", "(")]).contains("pattern x"));
        assert!(bad(&["x"], vec![p("x", "a*")]).contains("empty"));
        assert!(bad(&["phone"], vec![p("phone", "1")]).contains("built-in"));
        assert!(bad(&[], vec![p("Bad Name", "1")]).contains("name"));
        assert!(bad(&[], vec![p("x", &"a".repeat(600))]).contains("over"));
    }

    #[test]
    fn json_strings_and_keys_are_masked_and_hostile_text_is_fine() {
        let m = all();
        let phone = samples::cn_mobile(5);
        let mut v = serde_json::json!({"a": [phone.clone(), {"b": format!("x {phone}")}], phone.clone(): 1});
        m.mask_json(&mut v);
        assert!(!v.to_string().contains(&phone), "{v}");
        // Long and odd input: no panic, bounded work.
        let long = format!("{}{}", "1".repeat(100_000), "@".repeat(10_000));
        let _ = m.mask(&long);
        let _ = m.mask("\u{0}\u{202e}١٢٣٤٥٦٧٨٩٠١ 电话：+86 ");
    }
}
