//! A small mutation fuzzer for `cargo test`: stable Rust has no libFuzzer, so each target is
//! run on seeded random mutations of its corpus for a fixed number of inputs, without
//! coverage feedback. cargo-fuzz (`fuzz/`) runs the same targets with it, for longer.

use std::cell::{Cell, RefCell};
use std::panic::{self, AssertUnwindSafe};
use std::path::Path;
use std::sync::Once;

/// A panic a target hit: the input (hex), the seed and step that made it, and the panic.
#[derive(Debug)]
pub struct Failure {
    pub seed: u64,
    pub step: u32,
    pub input: Vec<u8>,
    pub panic: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hex: String = self.input.iter().map(|b| format!("{b:02x}")).collect();
        write!(
            f,
            "seed {} step {}: {}\n input ({} bytes, hex): {hex}\n as text: {}",
            self.seed,
            self.step,
            self.panic,
            self.input.len(),
            String::from_utf8_lossy(&self.input)
        )
    }
}

/// splitmix64: small, seedable, the same sequence on every platform.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number below `n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// Text a parser treats specially: numbers at the edges of every integer type, JSON's
/// punctuation and escapes, RFC 3339 times past year 9999, Unicode and control characters.
const TOKENS: &[&str] = &[
    "0",
    "-1",
    "-0",
    "1e309",
    "-1e309",
    "0.5",
    "1E2",
    "255",
    "256",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "-9223372036854775809",
    "18446744073709551615",
    "18446744073709551616",
    "1000000000000",
    "1000000000001",
    "null",
    "true",
    "false",
    "\"\"",
    "{}",
    "[]",
    "[[[[[[[[",
    "{\"a\":",
    "\"\\u0000\"",
    "\"\\ud800\"",
    "\"\\uDFFF\"",
    "\\",
    "\"",
    ",",
    ":",
    "\u{feff}",
    "é",
    "\u{202e}",
    "\r\n",
    "\"+10000-01-01T00:00:00Z\"",
    "\"9999-12-31T23:59:59.999Z\"",
    "\"0000-01-01T00:00:00Z\"",
    "\"2026-02-30T00:00:00+25:00\"",
    "\"type\":\"batch\",\"envelopes\":[",
    "Bearer ",
    "bearer ",
    "%00",
    "%ff",
    "&",
    "=",
    "?",
];

/// JSON values for [`replace_value`]: the edges of every integer type, times past year
/// 9999 and before year 0, empty, huge-ish and control-character strings, other types.
const VALUES: &[&str] = &[
    "0",
    "-1",
    "1e309",
    "0.5",
    "255",
    "256",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "-9223372036854775809",
    "18446744073709551615",
    "18446744073709551616",
    "1000000000000",
    "1000000000001",
    "8210266876799999",
    "253402300800000",
    "-62167219200001",
    "null",
    "true",
    "false",
    "{}",
    "[]",
    "\"\"",
    "\" \"",
    "\"\\u0000\"",
    "\"\u{202e}é\"",
    "\"+10000-01-01T00:00:00Z\"",
    "\"9999-12-31T23:59:59.999Z\"",
    "\"-0001-01-01T00:00:00Z\"",
    "\"todo\"",
    "\"batch\"",
    "\"lifetime\"",
    "\"c2\"",
    "\"a1\"",
    "\"r1\"",
];

/// Replaces the JSON number, string or literal at or after a random position with one of
/// [`VALUES`], keeping the document's structure.
fn replace_value(rng: &mut Rng, input: &mut Vec<u8>) {
    let len = input.len();
    let Some(start) = (rng.below(len.max(1))..len)
        .find(|&i| matches!(input[i], b'0'..=b'9' | b'-' | b'"' | b't' | b'f' | b'n'))
    else {
        return;
    };
    let end = if input[start] == b'"' {
        let mut i = start + 1;
        while i < len && input[i] != b'"' {
            i += if input[i] == b'\\' { 2 } else { 1 };
        }
        (i + 1).min(len)
    } else {
        let mut i = start + 1;
        while i < len
            && (input[i].is_ascii_alphanumeric() || matches!(input[i], b'.' | b'+' | b'-'))
        {
            i += 1;
        }
        i
    };
    let value = VALUES[rng.below(VALUES.len())].as_bytes();
    input.splice(start..end, value.iter().copied());
}

/// One random change to `input`: flip, set or insert bytes, insert a token, replace a JSON
/// value, delete or repeat a range, or splice in part of another corpus entry.
fn mutate_once(rng: &mut Rng, input: &mut Vec<u8>, corpus: &[Vec<u8>]) {
    let len = input.len();
    if rng.below(2) == 0 {
        return replace_value(rng, input);
    }
    match rng.below(8) {
        0 if len > 0 => {
            let i = rng.below(len);
            input[i] ^= 1 << rng.below(8);
        }
        1 if len > 0 => {
            let i = rng.below(len);
            input[i] = rng.next_u64() as u8;
        }
        2 | 3 => {
            let token = TOKENS[rng.below(TOKENS.len())].as_bytes();
            let at = rng.below(len + 1);
            // Half the time the token replaces what was there, a number's worth of it.
            let end = if rng.below(2) == 0 {
                (at + rng.below(21)).min(len)
            } else {
                at
            };
            input.splice(at..end, token.iter().copied());
        }
        4 if len > 0 => {
            let at = rng.below(len);
            let end = (at + 1 + rng.below(16)).min(len);
            input.drain(at..end);
        }
        5 if len > 0 => {
            let at = rng.below(len);
            let end = (at + 1 + rng.below(32)).min(len);
            let piece: Vec<u8> = input[at..end].to_vec();
            let to = rng.below(len + 1);
            input.splice(to..to, piece);
        }
        6 if !corpus.is_empty() => {
            let other = &corpus[rng.below(corpus.len())];
            if !other.is_empty() {
                let from = rng.below(other.len());
                let to = (from + 1 + rng.below(64)).min(other.len());
                let at = rng.below(len + 1);
                input.splice(at..at, other[from..to].iter().copied());
            }
        }
        _ => {
            let at = rng.below(len + 1);
            input.insert(at, rng.next_u64() as u8);
        }
    }
}

/// A mutant of a random corpus entry: one change, a second one time in three, and so on (at
/// most eight): few changes keep most mutants valid enough to reach past the parser.
pub fn mutant(rng: &mut Rng, corpus: &[Vec<u8>]) -> Vec<u8> {
    let mut input = match corpus.len() {
        0 => Vec::new(),
        n => corpus[rng.below(n)].clone(),
    };
    mutate_once(rng, &mut input, corpus);
    for _ in 1..8 {
        if rng.below(3) != 0 {
            break;
        }
        mutate_once(rng, &mut input, corpus);
    }
    input
}

/// The files of `dir`, in name order (a missing directory is an empty corpus).
pub fn load_corpus(dir: &Path) -> Vec<Vec<u8>> {
    let mut paths: Vec<_> = match std::fs::read_dir(dir) {
        Ok(entries) => entries.filter_map(|e| e.ok()).map(|e| e.path()).collect(),
        Err(_) => return Vec::new(),
    };
    paths.sort();
    paths.iter().filter_map(|p| std::fs::read(p).ok()).collect()
}

thread_local! {
    static CATCHING: Cell<bool> = const { Cell::new(false) };
    static CAUGHT: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Runs `target` on `input`; a panic becomes its message and place, unprinted (panics outside
/// this print as usual).
pub fn run_caught(target: fn(&[u8]), input: &[u8]) -> Result<(), String> {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let default = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if CATCHING.get() {
                CAUGHT.set(Some(info.to_string()));
            } else {
                default(info);
            }
        }));
    });
    CATCHING.set(true);
    let result = panic::catch_unwind(AssertUnwindSafe(|| target(input)));
    CATCHING.set(false);
    result.map_err(|_| CAUGHT.take().unwrap_or_else(|| "a panic".into()))
}

/// Runs `target` on every corpus entry, then on `steps` mutants drawn with `seed`; stops at
/// the first panic.
pub fn drive(target: fn(&[u8]), corpus: &[Vec<u8>], seed: u64, steps: u32) -> Result<(), Failure> {
    let fail = |step, input: &[u8], panic| Failure {
        seed,
        step,
        input: input.to_vec(),
        panic,
    };
    for input in corpus {
        run_caught(target, input).map_err(|p| fail(0, input, p))?;
    }
    let mut rng = Rng::new(seed);
    for step in 1..=steps {
        let input = mutant(&mut rng, corpus);
        run_caught(target, &input).map_err(|p| fail(step, &input, p))?;
    }
    Ok(())
}
