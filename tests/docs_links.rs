//! Every relative link in the README, `docs/` and `deploy/README.md` leads
//! somewhere: the file exists, and a `#fragment` names a heading of it.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn pages() -> Vec<PathBuf> {
    let mut pages = vec![root().join("README.md"), root().join("deploy/README.md")];
    for entry in std::fs::read_dir(root().join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            pages.push(path);
        }
    }
    pages
}

/// The targets of `[text](target)` links, outside code blocks and spans.
fn links(markdown: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut in_block = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if in_block {
            continue;
        }
        // Drop code spans, which may hold `](` that is no link.
        let prose: String = line.split('`').step_by(2).collect::<Vec<_>>().join("");
        let mut rest = prose.as_str();
        while let Some(start) = rest.find("](") {
            rest = &rest[start + 2..];
            if let Some(end) = rest.find(')') {
                found.push(rest[..end].to_owned());
                rest = &rest[end..];
            }
        }
    }
    found
}

/// GitHub's anchor of a heading: lower case, punctuation dropped, spaces
/// to dashes.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '-' || *c == ' ' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(markdown: &str) -> Vec<String> {
    let mut in_block = false;
    let mut found = Vec::new();
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
        } else if !in_block && line.starts_with('#') {
            found.push(anchor(line.trim_start_matches('#')));
        }
    }
    found
}

fn check(page: &Path, target: &str) -> Result<(), String> {
    if target.starts_with("http://") || target.starts_with("https://") {
        return Ok(());
    }
    let (file, fragment) = match target.split_once('#') {
        Some((file, fragment)) => (file, Some(fragment)),
        None => (target, None),
    };
    let path = if file.is_empty() {
        page.to_path_buf()
    } else {
        page.parent().unwrap().join(file)
    };
    if !path.exists() {
        return Err(format!("{target}: no such file"));
    }
    if let Some(fragment) = fragment {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        if !anchors(&text).iter().any(|a| a == fragment) {
            return Err(format!("{target}: no heading #{fragment}"));
        }
    }
    Ok(())
}

#[test]
fn every_relative_link_in_the_docs_resolves() {
    let mut broken = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for target in links(&text) {
            if let Err(problem) = check(&page, &target) {
                let name = page.strip_prefix(root()).unwrap().display().to_string();
                broken.push(format!("{name}: {problem}"));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn links_and_anchors_are_read_as_github_does() {
    assert_eq!(
        links("see [a](b.md#c) and `[x](y)`\n```\n[no](link)\n```\n[d](e)"),
        ["b.md#c", "e"]
    );
    assert_eq!(
        anchor(" Peering clusters: `ferry peer join`"),
        "peering-clusters-ferry-peer-join"
    );
    assert_eq!(anchor(" Appendix: internals"), "appendix-internals");
}
