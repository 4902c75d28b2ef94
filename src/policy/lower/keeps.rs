//! The custom section by which a module promises to keep its input, and
//! reading that promise. Needs only the module's bytes: no engine, no guest.

/// The custom section by which a module says it keeps its input until the
/// instance ends: the policy SDK's `policy!` macro writes it.
pub const KEEPS_INPUT_SECTION: &str = "ferry-policy-keeps-input";

/// What a module promises about its input, by the content of its
/// [`KEEPS_INPUT_SECTION`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Keeps {
    /// No section, or a content this version does not know: the component
    /// model's lowering, one guest allocation per string and list.
    #[default]
    Nothing,
    /// `0.1.0`: the module never frees the input's strings.
    Strings,
    /// `0.2.0`: no free of input memory reaches the module's allocator.
    Everything,
}

impl Keeps {
    /// The section contents this version knows, in the order of the
    /// promises. They number promises, not contracts.
    pub const TOKENS: [&'static str; 2] = ["0.1.0", "0.2.0"];
}

/// What the component's [`KEEPS_INPUT_SECTION`], if it has one, promises.
pub(crate) fn keeps_input(component: &[u8]) -> Keeps {
    let content =
        wasmparser::Parser::new(0)
            .parse_all(component)
            .find_map(|payload| match payload {
                Ok(wasmparser::Payload::CustomSection(section))
                    if section.name() == KEEPS_INPUT_SECTION =>
                {
                    Some(section.data())
                }
                _ => None,
            });
    let [strings, everything] = Keeps::TOKENS.map(str::as_bytes);
    match content {
        Some(c) if c == strings => Keeps::Strings,
        Some(c) if c == everything => Keeps::Everything,
        _ => Keeps::Nothing,
    }
}
