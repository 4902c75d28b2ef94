//! How refusals of a CRD's rules are worded: Go's `%q` and `%#v` as
//! kube-apiserver prints a rule, and cel-go's layout of a compile error with
//! its source line and caret. Pure; it formats and decides nothing.

use serde_json::Value;

fn text<'a>(raw: &'a Value, key: &str) -> &'a str {
    raw.get(key).and_then(Value::as_str).unwrap_or("")
}

/// A string quoted as Go's `%q` does, near enough for messages.
pub(crate) fn quote(s: &str) -> String {
    format!("{s:?}")
}

/// The rule as Go's `%#v` prints apiextensions' internal `ValidationRule`.
/// Go prints a set pointer as its address, which has no stable form here.
pub(crate) fn go_struct(raw: &Value) -> String {
    let pointer = |key: &str, type_name: &str| match raw.get(key) {
        Some(v) if !v.is_null() => format!("({type_name})(0xc000000000)"),
        _ => format!("({type_name})(nil)"),
    };
    format!(
        "apiextensions.ValidationRule{{Rule:{}, Message:{}, MessageExpression:{}, Reason:{}, FieldPath:{}, OptionalOldSelf:{}}}",
        quote(text(raw, "rule")),
        quote(text(raw, "message")),
        quote(text(raw, "messageExpression")),
        pointer("reason", "*apiextensions.FieldValueErrorReason"),
        quote(text(raw, "fieldPath")),
        pointer("optionalOldSelf", "*bool"),
    )
}

/// The CEL crate's parse errors in cel-go's layout (` | ` before the source
/// line and the caret line).
pub(crate) fn cel_go_style(errors: &str) -> String {
    errors.replace("\n| ", "\n | ")
}

/// Problems found by the static check, located as cel-go prints them.
pub(crate) fn located(source: &str, program: &cel::Program, problems: &[(u64, String)]) -> String {
    problems
        .iter()
        .map(|(id, message)| {
            let offset = program
                .source_info()
                .offset_for(*id)
                .map_or(0, |(start, _)| start as usize);
            let before: String = source.chars().take(offset).collect();
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count());
            let text = source.lines().nth(line - 1).unwrap_or("");
            format!(
                "ERROR: <input>:{line}:{}: {message}\n | {text}\n | {}^",
                column + 1,
                ".".repeat(column)
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}
