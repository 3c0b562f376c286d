//! Questions a policy asks of the request it decides on.

use super::PolicyContext;

impl PolicyContext {
    /// Whether any message mentions one of `terms`, case-insensitively. Empty
    /// terms are ignored (an empty string is in every text).
    pub fn mentions_any<S: AsRef<str>>(&self, terms: impl IntoIterator<Item = S>) -> bool {
        let terms: Vec<String> = terms.into_iter().map(|t| t.as_ref().to_lowercase()).filter(|t| !t.is_empty()).collect();
        // With no terms (the usual case for a configured list) no message is lower-cased.
        !terms.is_empty()
            && self.messages.iter().any(|m| {
                let text = m.content.to_lowercase();
                terms.iter().any(|t| text.contains(t.as_str()))
            })
    }

    /// The strings of the array `field` of this policy's config
    /// (`[plugins.settings.<policy>.config]` in the host config); empty when
    /// the field is missing or not an array, non-strings skipped.
    pub fn config_list(&self, field: &str) -> Vec<String> {
        let config: serde_json::Value = serde_json::from_str(&self.config_json).unwrap_or_default();
        config
            .get(field)
            .and_then(|v| v.as_array())
            .map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::context;
    use super::PolicyContext;

    #[test]
    fn mentions_any_ignores_case_and_empty_terms() {
        let ctx = context("About Project Falcon");
        assert!(ctx.mentions_any(["falcon"]));
        assert!(ctx.mentions_any(["FALCON"]), "terms are lower-cased too");
        assert!(!ctx.mentions_any(["heron"]));
        assert!(!ctx.mentions_any([""]), "an empty term matches nothing");
        assert!(!ctx.mentions_any(Vec::<String>::new()));
    }

    #[test]
    fn config_list_reads_string_arrays_only() {
        let with = |json: &str| PolicyContext { config_json: json.into(), ..context("x") };
        assert_eq!(with(r#"{"deny_terms":["a", 1, "b"]}"#).config_list("deny_terms"), ["a", "b"]);
        assert!(with(r#"{"deny_terms":"a"}"#).config_list("deny_terms").is_empty());
        assert!(with("not json").config_list("deny_terms").is_empty());
        assert!(with("").config_list("deny_terms").is_empty());
    }
}
