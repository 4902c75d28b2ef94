//! `-o/--output json|yaml|table`, one flag for every command that reads or
//! writes cluster objects. `table` is for people; `json` and `yaml` print
//! one document for programs, and nothing else goes to stdout with them.

use clap::ValueEnum;
use serde::Serialize;

/// How a command prints its result.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Aligned text for people.
    #[default]
    Table,
    /// One JSON document.
    Json,
    /// One YAML document.
    Yaml,
}

/// The `-o` flag, table by default.
#[derive(Debug, clap::Args)]
pub struct OutputArgs {
    /// Output format.
    #[arg(short = 'o', long = "output", env = "FERRY_OUTPUT", value_enum, default_value_t = Format::Table)]
    pub output: Format,
}

/// Prints `value` as JSON or YAML, or the `table` text for people.
pub fn print<T: Serialize>(
    format: Format,
    value: &T,
    table: impl FnOnce() -> String,
) -> anyhow::Result<()> {
    let text = match format {
        Format::Table => table(),
        Format::Json => serde_json::to_string_pretty(value)? + "\n",
        Format::Yaml => serde_saphyr::to_string(value)?,
    };
    print!("{text}");
    Ok(())
}

/// Rows under a header, each column as wide as its widest cell, two spaces
/// apart; the last column is not padded.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(width) = widths.get_mut(i) {
                *width = (*width).max(cell.chars().count());
            }
        }
    }
    let line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut text = String::new();
        for (i, cell) in cells.enumerate() {
            if i + 1 < widths.len() {
                let pad = widths[i] - cell.chars().count();
                text.push_str(cell);
                text.push_str(&" ".repeat(pad + 2));
            } else {
                text.push_str(cell);
            }
        }
        text.trim_end().to_owned() + "\n"
    };
    let mut out = line(&mut header.iter().copied());
    for row in rows {
        out.push_str(&line(&mut row.iter().map(String::as_str)));
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn table_aligns_columns() {
        let text = super::table(
            &["NAME", "READY"],
            &[
                vec!["east".into(), "true".into()],
                vec!["a".into(), "false".into()],
            ],
        );
        assert_eq!(text, "NAME  READY\neast  true\na     false\n");
    }
}
