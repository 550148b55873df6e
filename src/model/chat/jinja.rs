//! What transformers' Jinja2 environment for chat templates has
//! (`_compile_jinja_template` in `utils/chat_template_utils.py`), in minijinja:
//! its syntax flags, `raise_exception`, `strftime_now`, Python's `json.dumps`
//! as `tojson`, Python's methods (minijinja-contrib's `pycompat`), the
//! `{% generation %}` tag, and errors told in one line.

use minijinja::value::{Kwargs, ValueKind};
use minijinja::{AutoEscape, Environment, Error, ErrorKind, Value};

use super::TEMPLATE_FUEL;

/// `{% generation %}...{% endgeneration %}` (transformers' extension that marks
/// the assistant's text for training masks; it renders its body unchanged) as
/// `{% if true %}...{% endif %}`, whitespace control kept.
pub(super) fn without_generation_tags(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut rest = source;
    while let Some(start) = rest.find("{%") {
        out.push_str(&rest[..start]);
        let tag = &rest[start..];
        let inner = &tag[2..];
        let flag = inner.strip_prefix(['-', '+']).map_or("", |_| &inner[..1]);
        let body = inner[flag.len()..].trim_start();
        let replaced = [("endgeneration", "endif"), ("generation", "if true")].iter().find_map(|(word, with)| {
            let after = body.strip_prefix(word)?;
            let after_trim = after.trim_start();
            let closing = after_trim.strip_prefix(['-', '+']).unwrap_or(after_trim);
            closing.starts_with("%}").then(|| (format!("{{%{flag} {with} "), tag.len() - after.len()))
        });
        match replaced {
            Some((open, consumed)) => {
                out.push_str(&open);
                rest = &tag[consumed..];
            }
            None => {
                out.push_str("{%");
                rest = &tag[2..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Jinja2's environment as transformers configures it.
pub(super) fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    let syntax = minijinja::syntax::SyntaxConfig::builder().trim_blocks(true).lstrip_blocks(true).build();
    // The default delimiters with two whitespace flags always build.
    if let Ok(syntax) = syntax {
        env.set_syntax(syntax);
    }
    env.set_auto_escape_callback(|_| AutoEscape::None);
    env.set_fuel(Some(TEMPLATE_FUEL));
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.add_function("raise_exception", raise_exception);
    env.add_function("strftime_now", strftime_now);
    env.add_filter("tojson", tojson);
    env
}

/// The marker on an error `raise_exception` made: its message is the template's own.
#[derive(Debug, thiserror::Error)]
#[error("raised by the template")]
struct Raised;

fn raise_exception(message: String) -> Result<Value, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, message).with_source(Raised))
}

/// A minijinja error as one line: the template's own message for
/// `raise_exception`, the fuel limit said plainly, and the line.
pub(super) fn describe(e: &Error) -> String {
    let raised = std::error::Error::source(e).is_some_and(|s| s.is::<Raised>());
    let message = match (e.kind(), e.detail()) {
        (ErrorKind::OutOfFuel, _) => format!("it ran more than {TEMPLATE_FUEL} steps (a template that loops forever?) and was stopped"),
        (_, Some(detail)) if raised => format!("raise_exception: {detail}"),
        (kind, Some(detail)) => format!("{kind}: {detail}"),
        (kind, None) => kind.to_string(),
    };
    match e.line() {
        Some(line) => format!("{message} (line {line})"),
        None => message,
    }
}

/// `strftime_now(format)`: the current time (UTC) formatted as C's strftime
/// does for the codes chat templates use.
fn strftime_now(format: String) -> Result<Value, Error> {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
    Ok(Value::from(strftime(&format, secs)))
}

const MONTHS: [&str; 12] = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"];
const WEEKDAYS: [&str; 7] = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];

/// `format` for the UTC time `secs` after the epoch: `%Y %y %m %d %e %j %H %I
/// %M %S %p %b %B %h %a %A %F %T %D %%`; other codes are kept as written.
pub(super) fn strftime(format: &str, secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (hour, minute, second) = (rem / 3600, rem % 3600 / 60, rem % 60);
    let (year, month, day) = civil_from_days(days);
    // 1970-01-01 was a Thursday (index 3 from Monday).
    let weekday = (days + 3).rem_euclid(7) as usize;
    let yday = days - days_from_civil(year, 1, 1) + 1;
    let month_name = MONTHS[(month - 1) as usize];
    let hour12 = if hour % 12 == 0 { 12 } else { hour % 12 };
    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('Y') => out.push_str(&year.to_string()),
            Some('y') => out.push_str(&format!("{:02}", year.rem_euclid(100))),
            Some('m') => out.push_str(&format!("{month:02}")),
            Some('d') => out.push_str(&format!("{day:02}")),
            Some('e') => out.push_str(&format!("{day:>2}")),
            Some('j') => out.push_str(&format!("{yday:03}")),
            Some('H') => out.push_str(&format!("{hour:02}")),
            Some('I') => out.push_str(&format!("{hour12:02}")),
            Some('M') => out.push_str(&format!("{minute:02}")),
            Some('S') => out.push_str(&format!("{second:02}")),
            Some('p') => out.push_str(if hour < 12 { "AM" } else { "PM" }),
            Some('b') | Some('h') => out.push_str(&month_name[..3]),
            Some('B') => out.push_str(month_name),
            Some('a') => out.push_str(&WEEKDAYS[weekday][..3]),
            Some('A') => out.push_str(WEEKDAYS[weekday]),
            Some('F') => out.push_str(&format!("{year}-{month:02}-{day:02}")),
            Some('T') => out.push_str(&format!("{hour:02}:{minute:02}:{second:02}")),
            Some('D') => out.push_str(&format!("{month:02}/{day:02}/{:02}", year.rem_euclid(100))),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

/// Year, month (1-12), day (1-31) of a day count from 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `tojson` as transformers overrides it: Python's `json.dumps(x,
/// ensure_ascii=False, indent=None, separators=None, sort_keys=False)`.
fn tojson(value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    let ensure_ascii = kwargs.get::<Option<bool>>("ensure_ascii")?.unwrap_or(false);
    let sort_keys = kwargs.get::<Option<bool>>("sort_keys")?.unwrap_or(false);
    let indent = match kwargs.get::<Option<Value>>("indent")? {
        None => None,
        Some(v) if v.is_none() => None,
        Some(v) => match v.as_str() {
            Some(s) => Some(s.to_string()),
            None => Some(" ".repeat(usize::try_from(v)?)),
        },
    };
    let separators = match kwargs.get::<Option<Value>>("separators")? {
        Some(v) if !v.is_none() => {
            let item = v.get_item_by_index(0)?;
            let key = v.get_item_by_index(1)?;
            match (item.as_str(), key.as_str()) {
                (Some(i), Some(k)) => (i.to_string(), k.to_string()),
                _ => return Err(Error::new(ErrorKind::InvalidOperation, "tojson: separators must be two strings")),
            }
        }
        _ => (if indent.is_some() { "," } else { ", " }.to_string(), ": ".to_string()),
    };
    kwargs.assert_all_used()?;
    let mut out = String::new();
    let style = JsonStyle { indent, item: separators.0, key: separators.1, sort_keys, ensure_ascii };
    write_json(&mut out, value, &style, 0)?;
    Ok(Value::from(out))
}

struct JsonStyle {
    indent: Option<String>,
    item: String,
    key: String,
    sort_keys: bool,
    ensure_ascii: bool,
}

fn write_json(out: &mut String, value: &Value, style: &JsonStyle, depth: usize) -> Result<(), Error> {
    let newline = |out: &mut String, depth: usize| {
        if let Some(indent) = &style.indent {
            out.push('\n');
            out.push_str(&indent.repeat(depth));
        }
    };
    match value.kind() {
        ValueKind::None => out.push_str("null"),
        ValueKind::Bool => out.push_str(if value.is_true() { "true" } else { "false" }),
        ValueKind::Number => {
            if value.is_integer() {
                out.push_str(&value.to_string());
            } else {
                out.push_str(&python_float(f64::try_from(value.clone())?));
            }
        }
        ValueKind::String => write_json_str(out, value.as_str().unwrap_or_default(), style.ensure_ascii),
        ValueKind::Seq | ValueKind::Iterable => {
            let items: Vec<Value> = value.try_iter()?.collect();
            if items.is_empty() {
                out.push_str("[]");
                return Ok(());
            }
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(&style.item);
                }
                newline(out, depth + 1);
                write_json(out, item, style, depth + 1)?;
            }
            newline(out, depth);
            out.push(']');
        }
        ValueKind::Map => {
            let mut keys: Vec<Value> = value.try_iter()?.collect();
            if keys.is_empty() {
                out.push_str("{}");
                return Ok(());
            }
            if style.sort_keys {
                keys.sort();
            }
            out.push('{');
            for (i, key) in keys.iter().enumerate() {
                if i > 0 {
                    out.push_str(&style.item);
                }
                newline(out, depth + 1);
                // Python writes non-string keys as their JSON text, quoted.
                let name = match key.kind() {
                    ValueKind::String => key.as_str().unwrap_or_default().to_string(),
                    ValueKind::None => "null".to_string(),
                    ValueKind::Bool => if key.is_true() { "true" } else { "false" }.to_string(),
                    _ => key.to_string(),
                };
                write_json_str(out, &name, style.ensure_ascii);
                out.push_str(&style.key);
                write_json(out, &value.get_item(key)?, style, depth + 1)?;
            }
            newline(out, depth);
            out.push('}');
        }
        ValueKind::Undefined => return Err(Error::new(ErrorKind::UndefinedError, "tojson: the value is undefined")),
        kind => return Err(Error::new(ErrorKind::InvalidOperation, format!("tojson: a {kind} is not JSON serializable"))),
    }
    Ok(())
}

fn write_json_str(out: &mut String, s: &str, ensure_ascii: bool) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (ensure_ascii && (c as u32) > 0x7e) => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A float as Python's `repr` writes it (`1.0`, `0.1`, `1e-05`, `1e+16`, `NaN`, `Infinity`).
pub(super) fn python_float(v: f64) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    // `{:e}` gives the shortest digits that round-trip, as repr does: "1.5e-7".
    let sci = format!("{v:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mantissa) = mantissa.strip_prefix('-').map_or(("", mantissa), |m| ("-", m));
    let digits: String = mantissa.chars().filter(|c| c.is_ascii_digit()).collect();
    if (-4..16).contains(&exp) {
        let point = exp + 1; // digits before the decimal point
        let body = if point <= 0 {
            format!("0.{}{digits}", "0".repeat((-point) as usize))
        } else if point as usize >= digits.len() {
            format!("{digits}{}.0", "0".repeat(point as usize - digits.len()))
        } else {
            format!("{}.{}", &digits[..point as usize], &digits[point as usize..])
        };
        format!("{sign}{body}")
    } else {
        let tail = if digits.len() > 1 { format!("{}.{}", &digits[..1], &digits[1..]) } else { digits };
        format!("{sign}{tail}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs())
    }
}
