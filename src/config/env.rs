//! `${VAR}` and `${VAR:-default}` expansion of configuration strings from the environment.
//! `$$` writes a literal `$`. A variable that is unset and has no default is an error, so a
//! missing secret is caught at load time rather than sent upstream as an empty key.

/// Expands every `${…}` in `text` using `lookup` (the process environment in production).
pub fn expand_with(text: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<String, String> {
    if !text.contains('$') {
        return Ok(text.to_owned());
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(dollar) = rest.find('$') {
        out.push_str(&rest[..dollar]);
        let after = &rest[dollar + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(inner) = after.strip_prefix('{') {
            let close = inner
                .find('}')
                .ok_or_else(|| format!("unclosed '${{' in \"{text}\""))?;
            let expression = &inner[..close];
            let (name, default) = match expression.split_once(":-") {
                Some((name, default)) => (name, Some(default)),
                None => (expression, None),
            };
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(format!(
                    "'${{{expression}}}' is not a valid variable reference"
                ));
            }
            match (
                lookup(name).filter(|value| !value.is_empty() || default.is_none()),
                default,
            ) {
                (Some(value), _) => out.push_str(&value),
                (None, Some(default)) => out.push_str(default),
                (None, None) => {
                    return Err(format!(
                        "environment variable {name} is not set (write ${{{name}:-default}} to give a default)"
                    ));
                }
            }
            rest = &inner[close + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// Expands from the process environment.
pub fn expand(text: &str) -> Result<String, String> {
    expand_with(text, |name| std::env::var(name).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "HOST" => Some("example.test".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn variables_and_defaults_expand() {
        assert_eq!(
            expand_with("https://${HOST}/v1", env).unwrap(),
            "https://example.test/v1"
        );
        assert_eq!(expand_with("${PORT:-8080}", env).unwrap(), "8080");
        assert_eq!(expand_with("${HOST:-other}", env).unwrap(), "example.test");
        assert_eq!(expand_with("${EMPTY:-fallback}", env).unwrap(), "fallback");
        assert_eq!(expand_with("${EMPTY}", env).unwrap(), "");
        assert_eq!(
            expand_with("cost: $$5 and $x", env).unwrap(),
            "cost: $5 and $x"
        );
    }

    #[test]
    fn a_missing_variable_without_default_is_an_error() {
        let error = expand_with("Bearer ${API_KEY}", env).unwrap_err();
        assert!(error.contains("API_KEY is not set"), "{error}");
        assert!(expand_with("${unclosed", env).is_err());
        assert!(expand_with("${bad-name}", env).is_err());
    }
}
