//! Structured-output and tool fields of a request (`response_format`,
//! `json_schema`, `grammar`, `tools`, `tool_choice`, `functions`): until the
//! server wires the constraint engine in, each one it cannot honour is
//! refused with a 400 naming the field, never dropped in silence (a request
//! with `tools` answered with prose would mislead an agent into thinking
//! its tools were shown to the model).
//!
//! Accepted as no-ops: `response_format: {"type": "text"}`, an empty
//! `tools` list, `tool_choice: "none"`, `parallel_tool_calls` alone.
//!
//! Verified by the unit tests below (each field refused, the no-ops
//! accepted).

#![forbid(unsafe_code)]

use super::api::RequestBody;
use super::error::ApiError;
use serde_json::Value;

/// Refuses the fields this server cannot honour yet (400 naming the field).
pub fn refuse_unsupported(body: &RequestBody) -> Result<(), ApiError> {
    let s = body;
    let given = |v: &Option<Value>| v.as_ref().is_some_and(|v| !v.is_null());
    if let Some(rf) = s.response_format.as_ref().filter(|v| !v.is_null()) {
        let kind = rf.get("type").and_then(Value::as_str);
        if kind != Some("text") {
            return Err(ApiError::invalid(
                "response_format",
                format!(
                    "response_format type {} is not supported by this server yet \
                     (only \"text\"); no constrained decoding was applied",
                    kind.map_or("(missing)".to_string(), |k| format!("{k:?}"))
                ),
            ));
        }
    }
    for (name, v) in [
        ("json_schema", &s.json_schema),
        ("grammar", &s.grammar),
        ("functions", &s.functions),
        ("function_call", &s.function_call),
    ] {
        if given(v) {
            return Err(ApiError::invalid(
                name,
                format!("{name} is not supported by this server yet"),
            ));
        }
    }
    let has_tools = s
        .tools
        .as_ref()
        .is_some_and(|t| !t.is_null() && t.as_array().is_none_or(|a| !a.is_empty()));
    let choice_none = s
        .tool_choice
        .as_ref()
        .is_none_or(|c| c.is_null() || c == "none");
    if has_tools {
        return Err(ApiError::invalid(
            "tools",
            "tools are not supported by this server yet: the model would not see them",
        ));
    }
    if !choice_none {
        return Err(ApiError::invalid(
            "tool_choice",
            "tool_choice needs tools, which this server does not support yet",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(json: &str) -> Result<(), String> {
        let body: RequestBody = serde_json::from_str(json).expect("body");
        refuse_unsupported(&body).map_err(|e| e.param.clone().unwrap_or_default())
    }

    #[test]
    fn each_unsupported_field_is_refused_by_name() {
        let m = r#""messages":[{"role":"user","content":"hi"}]"#;
        let tool = r#"[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]"#;
        for (extra, param) in [
            (r#""response_format":{"type":"json_object"}"#.to_string(), "response_format"),
            (r#""response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{}}}"#.to_string(), "response_format"),
            (r#""response_format":{}"#.to_string(), "response_format"),
            (r#""json_schema":{"type":"object"}"#.to_string(), "json_schema"),
            (r#""grammar":"root ::= \"a\"""#.to_string(), "grammar"),
            (format!(r#""tools":{tool}"#), "tools"),
            (format!(r#""tools":{tool},"tool_choice":"none""#), "tools"),
            (r#""tool_choice":"required""#.to_string(), "tool_choice"),
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
            r#""tools":[]"#,
            r#""tool_choice":"none""#,
            r#""parallel_tool_calls":false"#,
            r#""grammar":null"#,
        ] {
            let json = format!("{{{m},{extra}}}");
            assert_eq!(check(&json), Ok(()), "{json}");
        }
    }
}
