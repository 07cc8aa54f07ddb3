//! Text normalisation shared by matching code (titles, aliases, query de-duplication).

use unicode_normalization::UnicodeNormalization;

/// NFKC (full width → half width), lower case, and no whitespace or punctuation.
pub fn normalize(s: &str) -> String {
    s.nfkc()
        .flat_map(char::to_lowercase)
        .filter(|c| c.is_alphanumeric())
        .collect()
}

/// A title without bracketed qualifiers (`（草案）`, `(draft)`), normalised.
pub fn base_title(title: &str) -> String {
    let mut depth = 0usize;
    let mut kept = String::with_capacity(title.len());
    for c in title.nfkc() {
        match c {
            '(' | '[' | '【' | '〔' => depth += 1,
            ')' | ']' | '】' | '〕' => depth = depth.saturating_sub(1),
            _ if depth == 0 => kept.push(c),
            _ => {}
        }
    }
    // Version markers at the end ("V2", "2.0") are not part of the title.
    let n = normalize(&kept);
    n.trim_end_matches(|c: char| c.is_ascii_digit() || c == 'v')
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_width_and_case_fold() {
        assert_eq!(normalize("Ｐａｙ-GW！"), "paygw");
        assert_eq!(
            base_title("开放平台 API 认证说明（双向 TLS 草案）"),
            "开放平台api认证说明"
        );
        assert_eq!(
            base_title("开放平台 API 认证说明 2.0"),
            "开放平台api认证说明"
        );
    }
}
