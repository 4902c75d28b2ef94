//! What `ferry policy upload` prints: the module's digest and one line per
//! change, or the same as one JSON or YAML document.

use ferry::modules::upload::UploadReport;
use serde::Serialize;

use super::output::{self, Format};

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Printed<'a> {
    module_sha256: &'a str,
    changes: &'a [String],
}

pub fn print(report: &UploadReport, format: Format) -> anyhow::Result<()> {
    let printed = Printed {
        module_sha256: &report.sha256,
        changes: &report.changes,
    };
    output::print(format, &printed, || {
        let mut text = format!("module sha256 {}\n", report.sha256);
        if report.changes.is_empty() {
            text.push_str("unchanged: the cluster already has this module and policy\n");
        }
        for change in &report.changes {
            text.push_str(change);
            text.push('\n');
        }
        text
    })
}
