//! Structured-output fields of a request (`response_format`,
//! `json_schema`, `grammar`, `functions`; `tools` are [`super::tools`]'s).
//!
//! Honoured: `response_format` `{"type": "json_object"}` and
//! `{"type": "json_schema", "json_schema": {"schema": …}}`, and
//! llama-server's `json_schema` field: each becomes a JSON-schema
//! [`Spec`] the worker compiles and applies as token masks; llama-server's
//! `grammar` (GBNF) becomes a Lark [`Spec`] ([`crate::gbnf`]), a GBNF error
//! a 400 naming its line and column. Each field the server cannot honour
//! (the legacy `functions` and `function_call`) is refused with a 400 naming the field, never dropped in
//! silence (a request with `functions` answered with prose would mislead an
//! agent into thinking its functions were shown to the model). Accepted as
//! a no-op: `response_format: {"type": "text"}`.
//!
//! Verified by the unit tests below (each field refused or turned into its
//! schema, the no-ops accepted) and `cli/tests/serve.rs`.

#![forbid(unsafe_code)]

use super::api::RequestBody;
use super::error::ApiError;
use crate::constrain::{Kind, Spec};
use serde_json::Value;

/// The request's constraint (`(field, spec)`), or a 400 naming the field it
/// cannot honour.
pub fn constraint(body: &RequestBody) -> Result<Option<(&'static str, Spec)>, ApiError> {
    let s = body;
    let given = |v: &Option<Value>| v.as_ref().is_some_and(|v| !v.is_null());
    let mut found = None;
    if let Some(rf) = s.response_format.as_ref().filter(|v| !v.is_null()) {
        let schema = |text: String| {
            Some((
                "response_format",
                Spec {
                    kind: Kind::JsonSchema,
                    text,
                },
            ))
        };
        found = match rf.get("type").and_then(Value::as_str) {
            Some("text") => None,
            Some("json_object") => schema(r#"{"type":"object"}"#.to_string()),
            Some("json_schema") => match rf.get("json_schema").and_then(|j| j.get("schema")) {
                Some(v) if v.is_object() || v.is_boolean() => schema(v.to_string()),
                _ => {
                    return Err(ApiError::invalid(
                        "response_format",
                        "response_format json_schema needs json_schema.schema (an object)",
                    ));
                }
            },
            kind => {
                return Err(ApiError::invalid(
                    "response_format",
                    format!(
                        "response_format type {} is not supported \
                         (\"text\", \"json_object\", \"json_schema\")",
                        kind.map_or("(missing)".to_string(), |k| format!("{k:?}"))
                    ),
                ));
            }
        };
    }
    if let Some(v) = s.json_schema.as_ref().filter(|v| !v.is_null()) {
        if found.is_some() {
            return Err(ApiError::invalid(
                "json_schema",
                "give either response_format or json_schema, not both",
            ));
        }
        found = Some((
            "json_schema",
            Spec {
                kind: Kind::JsonSchema,
                text: v.to_string(),
            },
        ));
    }
    if let Some(g) = s.grammar.as_ref().filter(|v| !v.is_null()) {
        if let Some((field, _)) = found {
            return Err(ApiError::invalid(
                "grammar",
                format!("give either grammar or {field}, not both"),
            ));
        }
        let Some(text) = g.as_str() else {
            return Err(ApiError::invalid(
                "grammar",
                "grammar must be a string (GBNF)",
            ));
        };
        let lark =
            crate::gbnf::to_lark(text).map_err(|e| ApiError::invalid("grammar", e.to_string()))?;
        found = Some((
            "grammar",
            Spec {
                kind: Kind::Lark,
                text: lark,
            },
        ));
    }
    for (name, v) in [
        ("functions", &s.functions),
        ("function_call", &s.function_call),
    ] {
        if given(v) {
            return Err(ApiError::invalid(
                name,
                format!(
                    "{name} is not supported by this server (the legacy function calling): use tools"
                ),
            ));
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_come_from_response_format_and_json_schema() {
        let m = r#""messages":[{"role":"user","content":"hi"}]"#;
        for (extra, field, text) in [
            (
                r#""response_format":{"type":"json_object"}"#,
                "response_format",
                r#"{"type":"object"}"#,
            ),
            (
                r#""response_format":{"type":"json_schema","json_schema":{"name":"p","strict":true,"schema":{"type":"integer"}}}"#,
                "response_format",
                r#"{"type":"integer"}"#,
            ),
            (
                r#""json_schema":{"type":"string"}"#,
                "json_schema",
                r#"{"type":"string"}"#,
            ),
        ] {
            let body: RequestBody =
                serde_json::from_str(&format!("{{{m},{extra}}}")).expect("body");
            let (f, spec) = constraint(&body).expect("ok").expect("a constraint");
            assert_eq!(
                (f, spec.kind, spec.text.as_str()),
                (field, Kind::JsonSchema, text)
            );
        }
    }

    fn check(json: &str) -> Result<(), String> {
        let body: RequestBody = serde_json::from_str(json).expect("body");
        constraint(&body)
            .map(|_| ())
            .map_err(|e| e.param.clone().unwrap_or_default())
    }

    #[test]
    fn each_unsupported_field_is_refused_by_name() {
        let m = r#""messages":[{"role":"user","content":"hi"}]"#;
        let tool = r#"[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]"#;
        for (extra, param) in [
            (
                r#""response_format":{"type":"json_schema","json_schema":{"name":"x"}}"#
                    .to_string(),
                "response_format",
            ),
            (r#""response_format":{}"#.to_string(), "response_format"),
            (
                r#""response_format":{"type":"xml"}"#.to_string(),
                "response_format",
            ),
            (
                r#""response_format":{"type":"json_object"},"json_schema":{}"#.to_string(),
                "json_schema",
            ),
            (r#""grammar":"root ::= \"a"#.to_string() + "\"", "grammar"),
            (r#""grammar":5"#.to_string(), "grammar"),
            (
                r#""grammar":"root ::= \"a\"","json_schema":{}"#.to_string(),
                "grammar",
            ),
            (
                format!(r#""functions":{tool},"function_call":"auto""#),
                "functions",
            ),
            (r#""functions":[{"name":"f"}]"#.to_string(), "functions"),
        ] {
            let json = format!("{{{m},{extra}}}");
            assert_eq!(check(&json), Err(param.to_string()), "{json}");
        }
    }

    #[test]
    fn no_op_fields_are_accepted() {
        let m = r#""messages":[{"role":"user","content":"hi"}]"#;
        for extra in [
            r#""response_format":{"type":"text"}"#,
            r#""response_format":null"#,
            r#""grammar":null"#,
            r#""grammar":"root ::= [a-z]+ \"!\"""#,
        ] {
            let json = format!("{{{m},{extra}}}");
            assert_eq!(check(&json), Ok(()), "{json}");
        }
    }

    #[test]
    fn a_gbnf_grammar_becomes_its_lark_translation() {
        let body: RequestBody = serde_json::from_str(
            r#"{"messages":[{"role":"user","content":"hi"}],"grammar":"root ::= \"y\" | \"n\""}"#,
        )
        .unwrap();
        let (field, spec) = constraint(&body).unwrap().expect("a constraint");
        assert_eq!((field, spec.kind), ("grammar", Kind::Lark));
        assert_eq!(spec.text, "start: \"y\" | \"n\"\n");
    }
}
