//! Secrets said in conversation: what a record must not carry at an ordinary sensitivity.
//!
//! `detect(text)` finds, by format and, where the format has one, by its checksum:
//! - payment card numbers: 13–19 digits (spaces or dashes between groups allowed) that
//!   pass the Luhn check and start like a card network's numbers (Visa, Mastercard, Amex,
//!   Discover, JCB, Diners, UnionPay);
//! - IBANs: a country code, two check digits and 11–30 letters or digits (spaces allowed)
//!   that pass the ISO 13616 mod-97 check;
//! - US social security numbers: `AAA-GG-SSSS` with a valid area, group and serial, or
//!   nine digits right after "SSN" / "social security";
//! - API keys and tokens by their published prefixes (OpenAI and Anthropic `sk-`, GitHub
//!   `ghp_`/`github_pat_`…, GitLab `glpat-`, Slack `xox?-`, AWS `AKIA…`, Google `AIza…`,
//!   Stripe `sk_live_`/`rk_live_`, JSON Web Tokens, PEM private keys, `Bearer …`);
//! - a password, passphrase, PIN or key given in words: "password is …", "pw: …",
//!   "my PIN is 4821", "api key: …" followed by a token without spaces.
//!
//! The checksums keep ordinary numbers (order ids, phone numbers, dates) out: a random 16
//! digits passes Luhn one time in ten and must also start like a card. Pure; no I/O.

use std::sync::LazyLock;

use regex::Regex;

/// A kind of secret, named in the tag `secret:<kind>` a record gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SecretKind {
    Card,
    Iban,
    Ssn,
    ApiKey,
    Password,
    PrivateKey,
}

impl SecretKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SecretKind::Card => "card",
            SecretKind::Iban => "iban",
            SecretKind::Ssn => "ssn",
            SecretKind::ApiKey => "api_key",
            SecretKind::Password => "password",
            SecretKind::PrivateKey => "private_key",
        }
    }
}

fn re(pattern: &str) -> Regex {
    Regex::new(pattern).expect("the secret patterns are valid")
}

static CARD: LazyLock<Regex> = LazyLock::new(|| re(r"(?:^|[^\d])(\d(?:[ -]?\d){12,18})(?:[^\d]|$)"));
static IBAN: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)\b([a-z]{2}\d{2}(?: ?[a-z0-9]){11,30})\b"));
static SSN: LazyLock<Regex> = LazyLock::new(|| re(r"(?:^|[^\d-])(\d{3})-(\d{2})-(\d{4})(?:[^\d-]|$)"));
static SSN_WORDS: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)\b(?:ssn|social security(?: number| no\.?| #)?)\D{0,20}(\d{3})[ -]?(\d{2})[ -]?(\d{4})\b"));
static TOKEN: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r"\b(?:sk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}",
        r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}",
        r"|glpat-[A-Za-z0-9_-]{20,}",
        r"|xox[abposr]-[A-Za-z0-9-]{10,}",
        r"|(?:AKIA|ASIA)[0-9A-Z]{16}",
        r"|AIza[0-9A-Za-z_-]{35}",
        r"|(?:sk|rk)_live_[0-9A-Za-z]{16,}",
        r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})",
    ))
});
/// What every [`TOKEN`] match contains (the pattern is case-sensitive).
const TOKEN_PREFIXES: [&str; 10] = ["sk-", "gh", "github_pat_", "glpat-", "xox", "AKIA", "ASIA", "AIza", "_live_", "eyJ"];
static BEARER: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)\bbearer\s+[A-Za-z0-9._~+/-]{20,}=*"));
static PEM: LazyLock<Regex> = LazyLock::new(|| re(r"-----BEGIN (?:[A-Z]+ )*PRIVATE KEY-----"));
/// A credential named in words, then its value: "password is hunter2", "pw: x9!k",
/// "my PIN is 4821", "api key = abc…", "passcode 1234".
static NAMED: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(password|passwd|passphrase|passcode|pw|pin|api[ _-]?key|secret key|access token|auth token|token)\b(?:\s+(?:is|was|=|:)|\s*[:=])\s*['`]?([^\s'`]{4,})",
    )
});

/// The kinds of secret in `text`, each once, in a stable order.
pub fn detect(text: &str) -> Vec<SecretKind> {
    let mut kinds: Vec<SecretKind> = find(text).into_iter().map(|(kind, _)| kind).collect();
    kinds.sort();
    kinds.dedup();
    kinds
}

/// Every secret in `text` with the byte range of its value, in order of position.
pub fn find(text: &str) -> Vec<(SecretKind, std::ops::Range<usize>)> {
    let mut found = Vec::new();
    // Cards, IBANs and SSNs have nine digits or more: most texts skip those patterns.
    if text.bytes().filter(u8::is_ascii_digit).count() >= 9 {
        for c in CARD.captures_iter(text) {
            let m = c.get(1).expect("group 1");
            if is_card(m.as_str()) {
                found.push((SecretKind::Card, m.range()));
            }
        }
        for c in IBAN.captures_iter(text) {
            let m = c.get(1).expect("group 1");
            if let Some(length) = iban_span(m.as_str()) {
                found.push((SecretKind::Iban, m.start()..m.start() + length));
            }
        }
        for c in SSN.captures_iter(text).chain(SSN_WORDS.captures_iter(text)) {
            let (a, b, s) = (c.get(1).expect("area"), c.get(2).expect("group"), c.get(3).expect("serial"));
            if valid_ssn(a.as_str(), b.as_str(), s.as_str()) {
                found.push((SecretKind::Ssn, a.start()..s.end()));
            }
        }
    }
    // Every other pattern needs a word or prefix of its own in the text: a text without any
    // (most messages) compiles and runs none of them. Case-insensitive patterns also match
    // non-ASCII letters (the Kelvin sign for "k"), so a non-ASCII text always runs them.
    let lower = text.is_ascii().then(|| text.to_ascii_lowercase());
    let may_hold = |words: &[&str]| lower.as_ref().is_none_or(|lower| words.iter().any(|w| lower.contains(w)));
    let tokens = TOKEN_PREFIXES.iter().any(|p| text.contains(p)).then(|| TOKEN.find_iter(text));
    let bearers = may_hold(&["bearer"]).then(|| BEARER.find_iter(text));
    for m in tokens.into_iter().flatten().chain(bearers.into_iter().flatten()) {
        found.push((SecretKind::ApiKey, m.range()));
    }
    let pems = text.contains("-----BEGIN ").then(|| PEM.find_iter(text));
    for m in pems.into_iter().flatten() {
        // The key runs to its END line, else to the end of the text.
        let end = text[m.end()..].find("PRIVATE KEY-----").map_or(text.len(), |i| m.end() + i + "PRIVATE KEY-----".len());
        found.push((SecretKind::PrivateKey, m.start()..end));
    }
    let named = may_hold(&["pass", "pw", "pin", "api", "secret", "token"]).then(|| NAMED.captures_iter(text));
    for c in named.into_iter().flatten() {
        let value = c.get(2).expect("group 2");
        if named_value(&c[1], value.as_str()) {
            let trimmed = value.as_str().trim_end_matches(['.', ',', ';', '!', '?', ')']).len();
            found.push((SecretKind::Password, value.start()..value.start() + trimmed));
        }
    }
    found.sort_by_key(|(kind, range)| (range.start, *kind));
    found
}

/// `text` with every secret's value replaced by `[secret:<kind>]` (borrowed when there is
/// none): for copies that carry no sensitivity of their own, such as the conversation log
/// and the session snapshots mneme writes.
pub fn redact(text: &str) -> std::borrow::Cow<'_, str> {
    let spans = find(text);
    if spans.is_empty() {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (kind, range) in spans {
        if range.start < at {
            // Overlaps the one before (a card number inside a "token: …"): already out.
            at = at.max(range.end);
            continue;
        }
        out.push_str(&text[at..range.start]);
        out.push_str(&format!("[secret:{}]", kind.as_str()));
        at = range.end;
    }
    out.push_str(&text[at..]);
    std::borrow::Cow::Owned(out)
}

/// A named credential's value: a PIN is digits; anything else must not be an ordinary
/// word that follows the name in a sentence ("my password is wrong", "the token was
/// expired"): it needs a digit or a symbol, or to be long and mixed-case.
fn named_value(name: &str, value: &str) -> bool {
    let value = value.trim_end_matches(['.', ',', ';', '!', '?', ')']);
    if name.eq_ignore_ascii_case("pin") {
        return (4..=12).contains(&value.len()) && value.chars().all(|c| c.is_ascii_digit());
    }
    let has_digit = value.chars().any(|c| c.is_ascii_digit());
    let has_symbol = value.chars().any(|c| !c.is_alphanumeric());
    let mixed = value.chars().any(char::is_uppercase) && value.chars().any(char::is_lowercase);
    value.chars().count() >= 4 && (has_digit || has_symbol || (mixed && value.len() >= 8))
}

fn is_card(candidate: &str) -> bool {
    let digits: Vec<u32> = candidate.chars().filter_map(|c| c.to_digit(10)).collect();
    if !(13..=19).contains(&digits.len()) || digits.iter().all(|&d| d == digits[0]) {
        return false;
    }
    let prefix = |n: usize| digits[..n].iter().fold(0u32, |acc, d| acc * 10 + d);
    let network = match digits[0] {
        4 => true,
        2 => (2221..=2720).contains(&prefix(4)),
        5 => (51..=55).contains(&prefix(2)),
        3 => matches!(prefix(2), 34 | 37 | 35 | 36 | 38 | 30),
        6 => prefix(4) == 6011 || prefix(2) == 65 || prefix(2) == 62 || (644..=649).contains(&prefix(3)),
        _ => false,
    };
    network && luhn(&digits)
}

fn luhn(digits: &[u32]) -> bool {
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| {
            if !i.is_multiple_of(2) {
                let x = d * 2;
                if x > 9 { x - 9 } else { x }
            } else {
                d
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

/// IBAN lengths by country (ISO 13616 registry): a candidate is cut to its country's
/// length, so the words after it do not spoil the check, and one length is tried.
const IBAN_LENGTHS: &[(&str, usize)] = &[
    ("AD", 24),
    ("AE", 23),
    ("AL", 28),
    ("AT", 20),
    ("AZ", 28),
    ("BA", 20),
    ("BE", 16),
    ("BG", 22),
    ("BH", 22),
    ("BR", 29),
    ("BY", 28),
    ("CH", 21),
    ("CR", 22),
    ("CY", 28),
    ("CZ", 24),
    ("DE", 22),
    ("DK", 18),
    ("DO", 28),
    ("EE", 20),
    ("EG", 29),
    ("ES", 24),
    ("FI", 18),
    ("FO", 18),
    ("FR", 27),
    ("GB", 22),
    ("GE", 22),
    ("GI", 23),
    ("GL", 18),
    ("GR", 27),
    ("GT", 28),
    ("HR", 21),
    ("HU", 28),
    ("IE", 22),
    ("IL", 23),
    ("IQ", 23),
    ("IS", 26),
    ("IT", 27),
    ("JO", 30),
    ("KW", 30),
    ("KZ", 20),
    ("LB", 28),
    ("LC", 32),
    ("LI", 21),
    ("LT", 20),
    ("LU", 20),
    ("LV", 21),
    ("MC", 27),
    ("MD", 24),
    ("ME", 22),
    ("MK", 19),
    ("MR", 27),
    ("MT", 31),
    ("MU", 30),
    ("NL", 18),
    ("NO", 15),
    ("PK", 24),
    ("PL", 28),
    ("PS", 29),
    ("PT", 25),
    ("QA", 29),
    ("RO", 24),
    ("RS", 22),
    ("SA", 24),
    ("SC", 31),
    ("SE", 24),
    ("SI", 19),
    ("SK", 24),
    ("SM", 27),
    ("TL", 23),
    ("TN", 24),
    ("TR", 26),
    ("UA", 29),
    ("VA", 22),
    ("VG", 24),
    ("XK", 20),
];

#[cfg(test)]
fn is_iban(candidate: &str) -> bool {
    iban_span(candidate).is_some()
}

/// When `candidate` starts with a valid IBAN: the bytes it takes (spaces included).
fn iban_span(candidate: &str) -> Option<usize> {
    let compact: String = candidate.chars().filter(char::is_ascii_alphanumeric).collect::<String>().to_ascii_uppercase();
    let &(_, length) = IBAN_LENGTHS.iter().find(|(country, _)| compact.starts_with(country))?;
    if compact.len() < length {
        return None;
    }
    let iban = &compact[..length];
    // ISO 13616: the first four characters moved to the end, letters as 10..35, mod 97 = 1.
    let mut remainder = 0u64;
    for c in iban[4..].chars().chain(iban[..4].chars()) {
        let value = u64::from(c.to_digit(36)?);
        remainder = if value >= 10 { (remainder * 100 + value) % 97 } else { (remainder * 10 + value) % 97 };
    }
    if remainder != 1 {
        return None;
    }
    // The byte where the `length`-th letter or digit ends.
    let mut seen = 0;
    candidate.char_indices().find_map(|(i, c)| {
        if c.is_ascii_alphanumeric() {
            seen += 1;
        }
        (seen == length).then_some(i + c.len_utf8())
    })
}

fn valid_ssn(area: &str, group: &str, serial: &str) -> bool {
    let area: u32 = area.parse().unwrap_or(0);
    area != 0 && area != 666 && area < 900 && group != "00" && serial != "0000"
}

#[cfg(test)]
mod tests {
    use super::*;
    use SecretKind::*;

    #[test]
    fn each_kind_is_found_in_a_sentence() {
        let cases: &[(&str, &[SecretKind])] = &[
            ("my SSN is 078-05-1120", &[Ssn]),
            ("social security number 078 05 1120, don't share it", &[Ssn]),
            ("card: 4111 1111 1111 1111 exp 12/29", &[Card]),
            ("pay with 5555-5555-5555-4444 please", &[Card]),
            ("amex 378282246310005", &[Card]),
            ("my IBAN is DE89 3704 0044 0532 0130 00", &[Iban]),
            ("send it to GB82WEST12345698765432", &[Iban]),
            ("use the key sk-proj-abcdefghijklmnopqrstuvwxyz123456", &[ApiKey]),
            ("token ghp_abcdefghijklmnopqrstuvwxyz0123456789", &[ApiKey]),
            ("my IBAN is DE89 3704 0044 0532 0130 00 thanks", &[Iban]),
            ("AKIAIOSFODNN7EXAMPLE is the access key id", &[ApiKey]),
            ("curl -H 'Authorization: Bearer abcdefghijklmnopqrstuvwxyz012345'", &[ApiKey]),
            ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA", &[PrivateKey]),
            ("the wifi password is hunter2!", &[Password]),
            ("my PIN is 4821", &[Password]),
            ("pw: Tr0ub4dor&3", &[Password]),
            // Each pattern's own word or prefix gates it (`find`): mixed case, a JWT, a
            // live key, and a non-ASCII text (which always runs the case-insensitive ones).
            ("API KEY = abcd1234efgh", &[Password]),
            ("AuthToken: jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N", &[ApiKey]),
            ("stripe rk_live_abcdefghijklmnop1234", &[ApiKey]),
            ("Straße, Passwort egal, password: hunter22", &[Password]),
            ("BEARER ABCDEFGHIJKLMNOPQRSTUVWXYZ012345 für später", &[ApiKey]),
        ];
        for (text, kinds) in cases {
            assert_eq!(detect(text), kinds.to_vec(), "{text}");
        }
    }

    #[test]
    fn ordinary_numbers_and_words_are_not_secrets() {
        for text in [
            "order 1234567890123 shipped",
            "call me at +49 30 1234 5678",
            "we met on 2024-05-17 at 10:30",
            "4111 1111 1111 1112 fails the checksum",
            "my password is wrong again",
            "the token was expired",
            "pin the tab please",
            "I always forget my keys",
            "my zip code is 10115 and I was born 1990",
            "DE89 is not an IBAN by itself",
            "the ticket number is 123-45-678",
            "000-12-3456 has no valid area",
            "0000000000000000",
        ] {
            assert_eq!(detect(text), Vec::<SecretKind>::new(), "{text}");
        }
    }

    #[test]
    fn redaction_replaces_the_values_and_keeps_the_sentence() {
        assert_eq!(redact("my SSN is 078-05-1120, ok?"), "my SSN is [secret:ssn], ok?");
        assert_eq!(redact("IBAN DE89 3704 0044 0532 0130 00 thanks"), "IBAN [secret:iban] thanks");
        assert_eq!(redact("the wifi password is hunter2!"), "the wifi password is [secret:password]!");
        assert_eq!(redact("card 4111 1111 1111 1111 and pin: 4821"), "card [secret:card] and pin: [secret:password]");
        assert_eq!(
            redact("key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\nbye"),
            "key:\n[secret:private_key]\nbye"
        );
        assert!(matches!(redact("nothing to see"), std::borrow::Cow::Borrowed(_)));
    }

    #[test]
    fn the_checksums_are_the_published_ones() {
        assert!(luhn(&[7, 9, 9, 2, 7, 3, 9, 8, 7, 1, 3]));
        assert!(!luhn(&[7, 9, 9, 2, 7, 3, 9, 8, 7, 1, 4]));
        assert!(is_iban("FR14 2004 1010 0505 0001 3M02 606"));
        assert!(!is_iban("FR15 2004 1010 0505 0001 3M02 606"));
    }
}
