//! GBNF (llama.cpp's grammar format) translated to llguidance's Lark, so
//! a `grammar` a llama.cpp client sends constrains the answer as a Lark
//! grammar does (`--grammar FILE.gbnf`, the server's `grammar` field).
//!
//! **What is read**: rules `name ::= alternatives` (names of letters,
//! digits, `-` and `_`; `root` is the start); alternatives `a | b` (an
//! empty one allowed); sequences of string literals `"…"`, character
//! classes `[…]` / `[^…]` (ranges `a-z`), `.` (any character), rule names
//! and groups `( … )`; the postfixes `*`, `+`, `?`, `{m}`, `{m,}`,
//! `{m,n}`; `#` comments to the end of the line. Escapes, in literals and
//! classes: `\n`, `\r`, `\t`, `\\`, `\"`, `\[`, `\]`, `\-`, `\xHH`,
//! `\uHHHH`, `\UHHHHHHHH`. Newlines are spaces (a rule ends where the next
//! `name ::=` begins), so every llama.cpp grammar reads, and some it would
//! refuse read too. Not read: llama.cpp's token references (`<[id]>`,
//! `<token>`), refused with their place.
//!
//! **What is written**: one Lark rule per line. Names are lowercased with
//! `-` as `_` (Lark rule names are lowercase), numbered `_2`, `_3`, … where
//! two would meet; `root` becomes `start`. Literals are JSON-escaped strings
//! (control characters and DEL as `\u00XX`); classes are regular
//! expressions with every character as `\x{H}`; `.` is `/(.|\n)/`; an empty
//! alternative is `""`; repeats are llguidance's `{m,n}`.
//!
//! **Errors** ([`GbnfError`]) name the line and column (1-based,
//! columns in characters) and what was expected; an undefined rule and a
//! missing `root` are errors too.
//!
//! Verified by the unit tests below (translations, each error's place)
//! and `cli/tests/constrain.rs` (llama.cpp's example grammars translate,
//! compile in llguidance and constrain generation).

#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::fmt;

/// Why a GBNF text does not translate, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GbnfError {
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for GbnfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "GBNF line {}, column {}: {}",
            self.line, self.column, self.message
        )
    }
}

/// A parsed expression.
#[derive(Clone, Debug)]
enum Expr {
    /// A literal (possibly empty).
    Lit(String),
    /// A character class: negated, inclusive ranges.
    Class(bool, Vec<(char, char)>),
    /// Any character.
    Any,
    /// A rule reference (its GBNF name).
    Rule(String),
    /// Alternatives of sequences.
    Alt(Vec<Vec<Expr>>),
    /// A repeat: the expression, its postfix as written (`*`, `{2,5}`, …).
    Repeat(Box<Expr>, String),
}

/// The cursor over the GBNF text.
struct Reader {
    chars: Vec<char>,
    pos: usize,
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_'
}

impl Reader {
    fn error(&self, at: usize, message: impl Into<String>) -> GbnfError {
        let before = &self.chars[..at.min(self.chars.len())];
        let line = 1 + before.iter().filter(|&&c| c == '\n').count();
        let column = 1 + before.iter().rev().take_while(|&&c| c != '\n').count();
        GbnfError {
            line,
            column,
            message: message.into(),
        }
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    /// Skips spaces, newlines and comments.
    fn space(&mut self) {
        while let Some(c) = self.peek() {
            if c == '#' {
                while self.peek().is_some_and(|c| c != '\n') {
                    self.pos += 1;
                }
            } else if c.is_whitespace() {
                self.pos += 1;
            } else {
                break;
            }
        }
    }

    /// A name at the cursor (not consumed): its end.
    fn name_end(&self, at: usize) -> usize {
        let mut e = at;
        while self.chars.get(e).copied().is_some_and(is_name_char) {
            e += 1;
        }
        e
    }

    /// Whether a rule definition (`name ::=`) begins at the cursor.
    fn at_definition(&self) -> bool {
        let e = self.name_end(self.pos);
        if e == self.pos {
            return false;
        }
        let mut k = e;
        while self.chars.get(k).is_some_and(|c| c.is_whitespace()) {
            k += 1;
        }
        self.chars.get(k..k + 3) == Some(&[':', ':', '='][..])
    }

    fn name(&mut self) -> Result<String, GbnfError> {
        let e = self.name_end(self.pos);
        if e == self.pos {
            return Err(self.error(self.pos, "expected a rule name"));
        }
        let n: String = self.chars[self.pos..e].iter().collect();
        self.pos = e;
        Ok(n)
    }

    /// Reads `count` hex digits as a character.
    fn hex(&mut self, count: usize, at: usize) -> Result<char, GbnfError> {
        let digits: String = self
            .chars
            .get(self.pos..self.pos + count)
            .unwrap_or_default()
            .iter()
            .collect();
        let v = (digits.len() == count)
            .then(|| u32::from_str_radix(&digits, 16).ok())
            .flatten()
            .ok_or_else(|| self.error(at, format!("expected {count} hex digits")))?;
        self.pos += count;
        char::from_u32(v).ok_or_else(|| self.error(at, format!("U+{v:X} is not a character")))
    }

    /// One character of a literal or class, escapes read.
    fn char(&mut self) -> Result<char, GbnfError> {
        let at = self.pos;
        let Some(c) = self.peek() else {
            return Err(self.error(at, "unexpected end of the grammar"));
        };
        self.pos += 1;
        if c != '\\' {
            return Ok(c);
        }
        let Some(e) = self.peek() else {
            return Err(self.error(at, "unexpected end after \\"));
        };
        self.pos += 1;
        Ok(match e {
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            '\\' | '"' | '[' | ']' | '-' | '/' | '\'' => e,
            'x' => self.hex(2, at)?,
            'u' => self.hex(4, at)?,
            'U' => self.hex(8, at)?,
            _ => return Err(self.error(at, format!("unknown escape \\{e}"))),
        })
    }

    fn literal(&mut self) -> Result<Expr, GbnfError> {
        let open = self.pos;
        self.pos += 1;
        let mut s = String::new();
        loop {
            match self.peek() {
                None | Some('\n') => {
                    return Err(self.error(open, "string literal not closed on its line"));
                }
                Some('"') => {
                    self.pos += 1;
                    return Ok(Expr::Lit(s));
                }
                Some(_) => s.push(self.char()?),
            }
        }
    }

    fn class(&mut self) -> Result<Expr, GbnfError> {
        let open = self.pos;
        self.pos += 1;
        let negated = self.peek() == Some('^');
        if negated {
            self.pos += 1;
        }
        let mut ranges = Vec::new();
        loop {
            match self.peek() {
                None => return Err(self.error(open, "character class not closed")),
                Some(']') => {
                    self.pos += 1;
                    break;
                }
                Some(_) => {
                    let at = self.pos;
                    let lo = self.char()?;
                    let hi = if self.peek() == Some('-')
                        && self.chars.get(self.pos + 1).is_some_and(|&c| c != ']')
                    {
                        self.pos += 1;
                        self.char()?
                    } else {
                        lo
                    };
                    if hi < lo {
                        return Err(self.error(at, format!("range {lo:?}-{hi:?} is backwards")));
                    }
                    ranges.push((lo, hi));
                }
            }
        }
        if ranges.is_empty() {
            return Err(self.error(open, "empty character class"));
        }
        Ok(Expr::Class(negated, ranges))
    }

    /// A postfix's text (`*`, `+`, `?`, `{m}`, `{m,}`, `{m,n}`), if one is next.
    fn postfix(&mut self) -> Result<Option<String>, GbnfError> {
        match self.peek() {
            Some(c @ ('*' | '+' | '?')) => {
                self.pos += 1;
                Ok(Some(c.to_string()))
            }
            Some('{') => {
                let at = self.pos;
                let close = self.chars[at..].iter().position(|&c| c == '}');
                let body: String = close
                    .map(|e| self.chars[at + 1..at + e].iter().collect())
                    .unwrap_or_default();
                let body: String = body.chars().filter(|c| !c.is_whitespace()).collect();
                let (m, n) = body.split_once(',').unwrap_or((&body, &body));
                let num = |s: &str| s.parse::<u32>().ok();
                let ok = close.is_some()
                    && num(m).is_some()
                    && (n.is_empty() || num(n).is_some_and(|n| n >= num(m).unwrap_or(0) && n > 0));
                if !ok {
                    return Err(self.error(at, "expected a repeat {m}, {m,} or {m,n} (n > 0)"));
                }
                self.pos = at + close.unwrap_or(0) + 1;
                Ok(Some(format!("{{{body}}}")))
            }
            _ => Ok(None),
        }
    }

    /// One primary expression with its postfixes.
    fn item(&mut self, depth: usize) -> Result<Expr, GbnfError> {
        let at = self.pos;
        let mut e = match self.peek() {
            Some('"') => self.literal()?,
            Some('[') => self.class()?,
            Some('.') => {
                self.pos += 1;
                Expr::Any
            }
            Some('(') => {
                if depth > 64 {
                    return Err(self.error(at, "groups nested more than 64 deep"));
                }
                self.pos += 1;
                let alt = self.alternatives(depth + 1)?;
                self.space();
                if self.peek() != Some(')') {
                    return Err(self.error(self.pos, "expected ')'"));
                }
                self.pos += 1;
                alt
            }
            Some('<') => {
                return Err(self.error(at, "token references (<…>) are not supported"));
            }
            Some(c) if is_name_char(c) => Expr::Rule(self.name()?),
            Some(c) => return Err(self.error(at, format!("unexpected {c:?}"))),
            None => return Err(self.error(at, "unexpected end of the grammar")),
        };
        while let Some(p) = self.postfix()? {
            e = Expr::Repeat(Box::new(e), p);
        }
        Ok(e)
    }

    /// Alternatives up to `)`, the end, or the next rule's definition.
    fn alternatives(&mut self, depth: usize) -> Result<Expr, GbnfError> {
        let mut alts = vec![Vec::new()];
        loop {
            self.space();
            match self.peek() {
                None | Some(')') => break,
                Some('|') => {
                    self.pos += 1;
                    alts.push(Vec::new());
                }
                Some(_) if depth == 0 && self.at_definition() => break,
                Some(_) => {
                    let e = self.item(depth)?;
                    if let Some(seq) = alts.last_mut() {
                        seq.push(e);
                    }
                }
            }
        }
        Ok(Expr::Alt(alts))
    }
}

/// GBNF names to Lark rule names.
struct Names(HashMap<String, String>, std::collections::HashSet<String>);

impl Names {
    fn of(&mut self, gbnf: &str) -> String {
        if let Some(n) = self.0.get(gbnf) {
            return n.clone();
        }
        let base = if gbnf == "root" {
            "start".to_string()
        } else {
            let s: String = gbnf
                .chars()
                .map(|c| {
                    if c == '-' {
                        '_'
                    } else {
                        c.to_ascii_lowercase()
                    }
                })
                .collect();
            if s.starts_with(|c: char| c.is_ascii_lowercase()) {
                s
            } else {
                format!("r_{s}")
            }
        };
        let mut name = base.clone();
        let mut k = 2;
        while self.1.contains(&name) || (name == "start" && gbnf != "root") {
            name = format!("{base}_{k}");
            k += 1;
        }
        self.1.insert(name.clone());
        self.0.insert(gbnf.to_string(), name.clone());
        name
    }
}

/// `s` as a Lark string literal.
fn lark_lit(s: &str) -> String {
    let mut o = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 || c == '\x7f' => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

fn write(e: &Expr, names: &mut Names, out: &mut String) {
    match e {
        Expr::Lit(s) => out.push_str(&lark_lit(s)),
        Expr::Class(neg, ranges) => {
            out.push_str(if *neg { "/[^" } else { "/[" });
            for &(lo, hi) in ranges {
                out.push_str(&format!("\\x{{{:x}}}", lo as u32));
                if hi != lo {
                    out.push_str(&format!("-\\x{{{:x}}}", hi as u32));
                }
            }
            out.push_str("]/");
        }
        Expr::Any => out.push_str("/(.|\\n)/"),
        Expr::Rule(n) => out.push_str(&names.of(n)),
        Expr::Alt(alts) => {
            out.push('(');
            write_alts(alts, names, out);
            out.push(')');
        }
        Expr::Repeat(inner, p) => {
            write(inner, names, out);
            out.push_str(p);
        }
    }
}

fn write_alts(alts: &[Vec<Expr>], names: &mut Names, out: &mut String) {
    for (i, seq) in alts.iter().enumerate() {
        if i > 0 {
            out.push_str(" | ");
        }
        if seq.is_empty() {
            out.push_str("\"\"");
        }
        for (j, e) in seq.iter().enumerate() {
            if j > 0 {
                out.push(' ');
            }
            write(e, names, out);
        }
    }
}

/// The rule names an expression refers to.
fn refs<'e>(e: &'e Expr, out: &mut Vec<&'e str>) {
    match e {
        Expr::Rule(n) => out.push(n),
        Expr::Alt(alts) => alts.iter().flatten().for_each(|e| refs(e, out)),
        Expr::Repeat(inner, _) => refs(inner, out),
        Expr::Lit(_) | Expr::Class(..) | Expr::Any => {}
    }
}

/// The GBNF `text` as an llguidance Lark grammar, or where it is wrong.
pub fn to_lark(text: &str) -> Result<String, GbnfError> {
    let mut r = Reader {
        chars: text.chars().collect(),
        pos: 0,
    };
    let mut rules: Vec<(String, usize, Expr)> = Vec::new();
    loop {
        r.space();
        if r.peek().is_none() {
            break;
        }
        let at = r.pos;
        if !r.at_definition() {
            return Err(r.error(at, "expected a rule definition (name ::= …)"));
        }
        let name = r.name()?;
        r.space();
        r.pos += 3; // `::=`, checked by at_definition
        if rules.iter().any(|(n, ..)| *n == name) {
            return Err(r.error(at, format!("rule {name:?} is defined twice")));
        }
        let body = r.alternatives(0)?;
        if r.peek() == Some(')') {
            return Err(r.error(r.pos, "')' without its '('"));
        }
        rules.push((name, at, body));
    }
    if !rules.iter().any(|(n, ..)| n == "root") {
        return Err(r.error(0, "no rule named root"));
    }
    for (_, at, body) in &rules {
        let mut used = Vec::new();
        refs(body, &mut used);
        if let Some(u) = used.iter().find(|u| !rules.iter().any(|(n, ..)| n == *u)) {
            return Err(r.error(
                *at,
                format!("this rule refers to {u:?}, which is not defined"),
            ));
        }
    }
    let mut names = Names(HashMap::new(), Default::default());
    names.of("root");
    let mut out = String::new();
    for (name, _, body) in &rules {
        out.push_str(&names.of(name));
        out.push_str(": ");
        match body {
            Expr::Alt(alts) => write_alts(alts, &mut names, &mut out),
            e => write(e, &mut names, &mut out),
        }
        out.push('\n');
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_literals_classes_and_repeats_translate() {
        let g = "root ::= greeting (\" \" name)+ [.!]? # a comment\n\
                 greeting ::= \"hi\\n\" | \"h\\\"ey\" |\n\
                 name ::= [A-Z] [^\\x00-\\x1F\\]]{1,8} .{2,} dataType\n\
                 dataType ::= \"\\u00e9\\x7F\"";
        assert_eq!(
            to_lark(g).unwrap(),
            "start: greeting (\" \" name)+ /[\\x{2e}\\x{21}]/?\n\
             greeting: \"hi\\u000a\" | \"h\\\"ey\" | \"\"\n\
             name: /[\\x{41}-\\x{5a}]/ /[^\\x{0}-\\x{1f}\\x{5d}]/{1,8} /(.|\\n)/{2,} datatype\n\
             datatype: \"é\\u007f\"\n"
        );
    }

    #[test]
    fn names_are_made_lark_names_without_collisions() {
        let g = "root ::= start a-b A_b 9x\nstart ::= \"s\"\na-b ::= \"1\"\nA_b ::= \"2\"\n9x ::= \"3\"";
        assert_eq!(
            to_lark(g).unwrap(),
            "start: start_2 a_b a_b_2 r_9x\nstart_2: \"s\"\na_b: \"1\"\na_b_2: \"2\"\nr_9x: \"3\"\n"
        );
    }

    #[test]
    fn errors_name_their_line_and_column() {
        for (g, line, column, what) in [
            ("root ::= \"abc", 1, 10, "not closed"),
            ("root ::= a\n\na ::= [b", 3, 7, "not closed"),
            ("root ::= x", 1, 1, "\"x\", which is not defined"),
            ("a ::= \"x\"", 1, 1, "no rule named root"),
            ("root ::= \"a\" )", 1, 14, "without its"),
            ("root ::= (\"a\"", 1, 14, "expected ')'"),
            ("root ::= \"\\q\"", 1, 11, "unknown escape"),
            ("root ::= [z-a]", 1, 11, "backwards"),
            ("root ::= \"a\"{3,1}", 1, 13, "repeat"),
            ("root ::= \"a\"\nroot ::= \"b\"", 2, 1, "defined twice"),
            ("root ::= <[42]>", 1, 10, "token references"),
            ("\"x\"", 1, 1, "expected a rule definition"),
            ("root ::= []", 1, 10, "empty character class"),
        ] {
            let e = to_lark(g).expect_err(g);
            assert_eq!((e.line, e.column), (line, column), "{g}: {e}");
            assert!(e.message.contains(what), "{g}: {e}");
        }
    }
}
