//! Text normalisation shared by matching code (titles, aliases, query de-duplication).

use unicode_normalization::UnicodeNormalization;

/// Whether a character is a Han (CJK unified) ideograph: the range every
/// Chinese-or-not decision of the engine and the agent counts.
pub fn is_han(c: char) -> bool {
    ('\u{4e00}'..='\u{9fff}').contains(&c)
}

/// Whether a text is written mainly in Chinese characters: at least one Han ideograph
/// and at least half as many as Latin letters (identifiers and numbers do not count, so
/// "受影响客户：C-1001、C-1002。" is Chinese). The one script test the engine and the
/// agent share.
pub fn mostly_han(s: &str) -> bool {
    let h = s.chars().filter(|c| is_han(*c)).count();
    let latin = s.chars().filter(char::is_ascii_alphabetic).count();
    h >= 1 && h * 2 >= latin
}

/// NFKC (full width → half width), lower case, and no whitespace or punctuation.
pub fn normalize(s: &str) -> String {
    s.nfkc()
        .flat_map(char::to_lowercase)
        .filter(|c| c.is_alphanumeric())
        .collect()
}

/// The title with bracketed qualifiers (`（草案）`, `(draft)`) removed, NFKC-folded but
/// not otherwise normalised.
fn unbracketed(title: &str) -> String {
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
    kept
}

/// A title without bracketed qualifiers (`（草案）`, `(draft)`), normalised.
pub fn base_title(title: &str) -> String {
    // Version markers at the end ("V2", "2.0") are not part of the title.
    let n = normalize(&unbracketed(title));
    n.trim_end_matches(|c: char| c.is_ascii_digit() || c == 'v')
        .to_string()
}

/// What look-alike detection reads from a title: the stem documents are grouped by and
/// the series number at its end, if any.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TitleKey {
    /// The title without bracketed qualifiers and without a trailing version marker or
    /// series number, normalised (empty: nothing to compare).
    pub stem: String,
    /// A trailing bare number (`Meeting notes 12`, `Report 2026-11`) with its leading
    /// zeros dropped: an instance of a series, not a version. `None` when the title ends
    /// in a version marker (`V2`, `v1.1`, `2.0`) or in no number at all.
    pub series: Option<String>,
}

/// Splits a title into its [`TitleKey`]. A trailing number counts only when it stands
/// apart from the word before it (`Notes 12`, `认证说明2.0`; not `P204`). With a `v`
/// before it or a dot inside it (`V2`, `2.0`) it is a version marker, which the stem
/// drops so that the versions of a title share one stem; a bare number (`12`,
/// `2026-11`) is a series number, dropped from the stem too but kept beside it:
/// titles that differ only in it name different instances of a series, not versions.
pub fn title_key(title: &str) -> TitleKey {
    let kept = unbracketed(title);
    let chars: Vec<char> = kept.chars().collect();
    let mut end = chars.len();
    while end > 0 && !chars[end - 1].is_alphanumeric() {
        end -= 1;
    }
    let numeric = |c: char| c.is_ascii_digit() || matches!(c, '.' | '-' | '_');
    let mut start = end;
    while start > 0 && numeric(chars[start - 1]) {
        start -= 1;
    }
    while start < end && !chars[start].is_ascii_digit() {
        start += 1;
    }
    let apart = |i: usize| i == 0 || !chars[i - 1].is_ascii_alphanumeric();
    let whole = |cut: usize, series: Option<String>| TitleKey {
        stem: normalize(&chars[..cut].iter().collect::<String>()),
        series,
    };
    if start == end || end == 0 || !chars[end - 1].is_ascii_digit() {
        return whole(chars.len(), None);
    }
    let number = &chars[start..end];
    let v_before = start > 0 && matches!(chars[start - 1], 'v' | 'V') && apart(start - 1);
    if v_before {
        return whole(start - 1, None);
    }
    if !apart(start) {
        return whole(chars.len(), None);
    }
    if number.contains(&'.') {
        return whole(start, None);
    }
    let series = number
        .split(|c| matches!(c, '-' | '_'))
        .filter(|part| !part.is_empty())
        .map(|part| {
            let digits: String = part.iter().skip_while(|&&c| c == '0').collect();
            if digits.is_empty() {
                "0".to_string()
            } else {
                digits
            }
        })
        .collect::<Vec<_>>()
        .join("-");
    whole(start, Some(series))
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

    fn key(stem: &str, series: Option<&str>) -> TitleKey {
        TitleKey {
            stem: stem.into(),
            series: series.map(Into::into),
        }
    }

    #[test]
    fn a_version_marker_is_dropped_and_a_bare_number_is_a_series_number() {
        assert_eq!(title_key("Policy V2"), key("policy", None));
        assert_eq!(title_key("Policy v1.1"), key("policy", None));
        assert_eq!(title_key("Policy 2.0"), key("policy", None));
        assert_eq!(title_key("Policy (draft)"), key("policy", None));
        assert_eq!(title_key("Policy"), key("policy", None));
        assert_eq!(
            title_key("开放平台 API 认证说明 2.0"),
            key("开放平台api认证说明", None)
        );
        assert_eq!(
            title_key("开放平台 API 认证说明2.0"),
            key("开放平台api认证说明", None)
        );
        assert_eq!(
            title_key("开放平台 API 认证说明（双向 TLS 草案）"),
            key("开放平台api认证说明", None)
        );
        assert_eq!(
            title_key("Meeting notes 12"),
            key("meetingnotes", Some("12"))
        );
        assert_eq!(
            title_key("Meeting notes 012."),
            key("meetingnotes", Some("12"))
        );
        assert_eq!(title_key("Report 2026-11"), key("report", Some("2026-11")));
        assert_eq!(
            title_key("风控异常周报 2026-11 第 4 周"),
            key("风控异常周报202611第4周", None)
        );
        // A number joined to a word is part of it.
        assert_eq!(title_key("Product P204"), key("productp204", None));
        assert_eq!(title_key("Notes12"), key("notes12", None));
        assert_eq!(title_key("2024"), key("", Some("2024")));
    }
}
