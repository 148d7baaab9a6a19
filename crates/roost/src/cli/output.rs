//! Human output (aligned tables, `key: value` blocks) and `--json` output.
//!
//! Everything shown comes from the server and much of it was written by agents, so text is
//! cleaned of control characters before it reaches a terminal: an issue title must not be able
//! to move the cursor or change the window title.

use std::io::Write;

use roost_core::Timestamp;
use serde::Serialize;

/// Where command results go: pretty JSON for scripts, or text for people.
#[derive(Clone, Copy, Debug)]
pub struct Output {
    json: bool,
}

impl Output {
    pub fn new(json: bool) -> Self {
        Output { json }
    }

    pub fn is_json(self) -> bool {
        self.json
    }

    /// Prints `value` as JSON, or the text `human` renders from it.
    pub fn show<T: Serialize + ?Sized>(
        self,
        value: &T,
        human: impl FnOnce(&T) -> String,
    ) -> anyhow::Result<()> {
        let mut text = if self.json {
            serde_json::to_string_pretty(value)?
        } else {
            human(value)
        };
        if !text.ends_with('\n') {
            text.push('\n');
        }
        write_stdout(&text)
    }
}

/// `-q/--quiet` output: one value (an id, an identifier, a token) on a line of its own and
/// nothing else, so `$(roost ... -q)` captures exactly it. It wins over `--json`.
pub fn print_only(value: &str) -> anyhow::Result<()> {
    write_stdout(&format!("{}\n", one_line(value.trim())))
}

/// Writes to stdout, treating a closed pipe (`roost issue list | head`) as success.
fn write_stdout(text: &str) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

/// Columns padded to their widest cell, two spaces apart; the last column is not padded, so
/// a long title costs no trailing spaces.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let cleaned: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.iter().map(|c| one_line(c)).collect())
        .collect();
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in &cleaned {
        for (i, cell) in row.iter().enumerate().take(widths.len()) {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let header_cells: Vec<String> = headers.iter().map(|h| h.to_string()).collect();
    for row in std::iter::once(&header_cells).chain(cleaned.iter()) {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate().take(widths.len()) {
            if i + 1 == widths.len() {
                line.push_str(cell);
            } else {
                line.push_str(cell);
                line.extend(std::iter::repeat_n(
                    ' ',
                    widths[i] - cell.chars().count() + 2,
                ));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// A `key: value` block with the values aligned.
pub fn fields(pairs: &[(&str, String)]) -> String {
    let width = pairs
        .iter()
        .map(|(k, _)| k.chars().count())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for (key, value) in pairs {
        out.push_str(&format!(
            "{:<w$}  {}\n",
            format!("{key}:"),
            one_line(value),
            w = width + 1
        ));
    }
    out
}

/// A value for one line: control characters (newlines included) become spaces.
pub fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// Multi-line text (descriptions, comment bodies): newlines and tabs stay, other control
/// characters such as ESC are shown as `?`.
pub fn multi_line(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() && c != '\n' && c != '\t' {
                '?'
            } else {
                c
            }
        })
        .collect()
}

/// Text indented by `pad` spaces on every line, for bodies under a heading.
pub fn indented(text: &str, pad: usize) -> String {
    let prefix = " ".repeat(pad);
    multi_line(text)
        .lines()
        .map(|l| format!("{prefix}{l}\n"))
        .collect()
}

/// An optional value, `-` when absent.
pub fn or_dash<T: ToString>(value: Option<T>) -> String {
    value.map(|v| v.to_string()).unwrap_or_else(|| "-".into())
}

/// A timestamp to the second, in UTC, for tables.
pub fn when(t: Timestamp) -> String {
    match chrono::DateTime::from_timestamp_millis(t.millis()) {
        Some(t) => t.format("%Y-%m-%d %H:%M:%S").to_string(),
        None => t.millis().to_string(),
    }
}

/// How long ago `then` was, in the largest whole unit (`45s`, `3m`, `2h`, `5d`), for tables
/// where the exact time matters less than how stale a thing is. A time in the future (a clock
/// ahead of ours) counts as `0s`.
pub fn age(now: Timestamp, then: Timestamp) -> String {
    let secs = now.millis().saturating_sub(then.millis()).max(0) / 1000;
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86_400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_columns_and_leave_the_last_one_ragged() {
        let rows = vec![
            vec![
                "RST-1".to_string(),
                "todo".to_string(),
                "Write the docs".to_string(),
            ],
            vec![
                "RST-10".to_string(),
                "in_progress".to_string(),
                "Fix it".to_string(),
            ],
        ];
        let text = table(&["IDENT", "STATUS", "TITLE"], &rows);
        let expected = "\
IDENT   STATUS       TITLE
RST-1   todo         Write the docs
RST-10  in_progress  Fix it
";
        assert_eq!(text, expected);
    }

    #[test]
    fn an_empty_table_is_its_header_and_wide_characters_count_once() {
        assert_eq!(table(&["ID", "NAME"], &[]), "ID  NAME\n");
        let rows = vec![
            vec!["é".to_string(), "x".to_string()],
            vec!["ab".to_string(), "-".to_string()],
        ];
        assert_eq!(table(&["K", "V"], &rows), "K   V\né   x\nab  -\n");
    }

    #[test]
    fn control_characters_cannot_break_a_table_or_reach_the_terminal() {
        let rows = vec![vec![
            "A\nB".to_string(),
            "\u{1b}]0;pwned\u{7}title".to_string(),
        ]];
        let text = table(&["X", "Y"], &rows);
        assert_eq!(text.lines().count(), 2, "{text:?}");
        assert!(!text.contains('\u{1b}'));
        assert_eq!(
            multi_line("line 1\n\tline 2\u{1b}[2J"),
            "line 1\n\tline 2?[2J"
        );
    }

    #[test]
    fn field_blocks_align_values() {
        let text = fields(&[
            ("id", "i1".into()),
            ("status", "todo".into()),
            ("assignee", or_dash(None::<&str>)),
        ]);
        assert_eq!(text, "id:        i1\nstatus:    todo\nassignee:  -\n");
    }

    #[test]
    fn timestamps_are_shown_to_the_second() {
        assert_eq!(when(Timestamp(1_763_769_600_123)), "2025-11-22 00:00:00");
        assert_eq!(indented("a\nb", 2), "  a\n  b\n");
    }

    #[test]
    fn ages_use_the_largest_whole_unit() {
        let now = Timestamp(10 * 86_400_000);
        let ago = |ms: i64| age(now, Timestamp(now.millis() - ms));
        assert_eq!(ago(0), "0s");
        assert_eq!(ago(59_999), "59s");
        assert_eq!(ago(60_000), "1m");
        assert_eq!(ago(3 * 3_600_000 + 5), "3h");
        assert_eq!(ago(2 * 86_400_000), "2d");
        assert_eq!(ago(-5_000), "0s", "a clock ahead of ours");
    }
}
